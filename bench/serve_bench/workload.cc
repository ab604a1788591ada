#include "bench/serve_bench/workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/json.h"

namespace rill::bench {
namespace {

int DrawLength(int len, double range, std::mt19937_64& rng) {
  if (range <= 0) return len;
  const int lo = std::max(1, static_cast<int>(std::floor(len * (1 - range))));
  const int hi = std::max(lo, static_cast<int>(std::ceil(len * (1 + range))));
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

absl::StatusOr<BenchRequest> ParseLine(const std::string& line, int default_output_len) {
  absl::StatusOr<base::json::JsonValue> doc = base::json::ParseJson(line);
  if (!doc.ok()) return doc.status();
  if (!doc->is_object()) return absl::InvalidArgumentError("not a JSON object");
  BenchRequest r;
  r.max_tokens = default_output_len;
  if (const base::json::JsonValue* out = doc->Find("output_len")) {
    std::optional<int64_t> n = out->AsInt64();
    if (!n || *n < 1 || *n > 1000000) return absl::InvalidArgumentError("output_len must be an integer >= 1");
    r.max_tokens = static_cast<int>(*n);
  }
  const base::json::JsonValue* text = doc->Find("prompt");
  const base::json::JsonValue* ids = doc->Find("prompt_token_ids");
  if ((text != nullptr) == (ids != nullptr)) {
    return absl::InvalidArgumentError("needs exactly one of \"prompt\" and \"prompt_token_ids\"");
  }
  if (text != nullptr) {
    if (!text->is_string() || text->string_value().empty()) {
      return absl::InvalidArgumentError("\"prompt\" must be a non-empty string");
    }
    r.text = text->string_value();
    return r;
  }
  if (!ids->is_array() || ids->array_items().empty()) {
    return absl::InvalidArgumentError("\"prompt_token_ids\" must be a non-empty array");
  }
  for (const base::json::JsonValue& v : ids->array_items()) {
    std::optional<int64_t> id = v.AsInt64();
    if (!id || *id < 0 || *id > INT32_MAX) {
      return absl::InvalidArgumentError("\"prompt_token_ids\" must hold non-negative integers");
    }
    r.token_ids.push_back(static_cast<int32_t>(*id));
  }
  return r;
}

}  // namespace

absl::StatusOr<std::vector<BenchRequest>> SyntheticWorkload(const SyntheticOptions& o) {
  if (o.num_requests < 1) return absl::InvalidArgumentError("num_requests must be >= 1");
  if (o.input_len < 1 || o.output_len < 1) {
    return absl::InvalidArgumentError("input_len and output_len must be >= 1");
  }
  if (o.input_len_range < 0 || o.input_len_range >= 1 || o.output_len_range < 0 ||
      o.output_len_range >= 1) {
    return absl::InvalidArgumentError("length ranges must be in [0, 1)");
  }
  if (o.shared_prefix_len < 0 || o.shared_prefix_len >= o.input_len) {
    return absl::InvalidArgumentError("shared_prefix_len must be in [0, input_len)");
  }
  if (o.id_lo < 0 || o.id_hi <= o.id_lo) return absl::InvalidArgumentError("bad token id range");
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int32_t> id(o.id_lo, o.id_hi - 1);
  std::vector<int32_t> prefix(o.shared_prefix_len);
  for (int32_t& t : prefix) t = id(rng);
  std::vector<BenchRequest> out(o.num_requests);
  for (BenchRequest& r : out) {
    const int len = std::max(o.shared_prefix_len + 1, DrawLength(o.input_len, o.input_len_range, rng));
    r.token_ids = prefix;
    while (static_cast<int>(r.token_ids.size()) < len) r.token_ids.push_back(id(rng));
    r.max_tokens = DrawLength(o.output_len, o.output_len_range, rng);
  }
  return out;
}

absl::Status MixInLongPrompts(const LongPromptOptions& o, std::vector<BenchRequest>* requests) {
  if (!(o.fraction >= 0 && o.fraction <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("long prompt fraction must be in [0, 1], got ", o.fraction));
  }
  if (o.input_len < 1 || o.output_len < 1) {
    return absl::InvalidArgumentError("long prompt input_len and output_len must be >= 1");
  }
  if (o.id_lo < 0 || o.id_hi <= o.id_lo) return absl::InvalidArgumentError("bad token id range");
  const size_t n = requests->size();
  const size_t num_long = static_cast<size_t>(std::llround(o.fraction * static_cast<double>(n)));
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(o.seed ^ 0x6c6f6e67ULL);  // Apart from the short prompts' stream.
  std::shuffle(order.begin(), order.end(), rng);
  std::uniform_int_distribution<int32_t> id(o.id_lo, o.id_hi - 1);
  for (size_t k = 0; k < num_long; ++k) {
    BenchRequest& r = (*requests)[order[k]];
    r.text.clear();
    r.token_ids.resize(o.input_len);
    for (int32_t& t : r.token_ids) t = id(rng);
    r.max_tokens = o.output_len;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<BenchRequest>> LoadDataset(const std::string& path, int num_requests,
                                                      int default_output_len) {
  if (num_requests < 1) return absl::InvalidArgumentError("num_requests must be >= 1");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open dataset ", path));
  std::vector<BenchRequest> lines;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    absl::StatusOr<BenchRequest> r = ParseLine(line, default_output_len);
    if (!r.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_no, ": ", r.status().message()));
    }
    lines.push_back(std::move(*r));
  }
  if (lines.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no prompts"));
  std::vector<BenchRequest> out;
  out.reserve(num_requests);
  for (int i = 0; i < num_requests; ++i) out.push_back(lines[i % lines.size()]);
  return out;
}

}  // namespace rill::bench
