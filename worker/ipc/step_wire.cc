#include "worker/ipc/step_wire.h"

#include <algorithm>

namespace rill::worker {

void SequenceToWire(const SequenceChunk& in, rill::internal::StepSequence* out) {
  out->mutable_tokens()->Add(in.tokens.begin(), in.tokens.end());
  out->set_start_pos(in.start_pos);
  out->mutable_block_table()->Add(in.block_table.begin(), in.block_table.end());
  out->set_all_logits(in.all_logits);
  if (!in.device_sampling.has_value()) return;
  const DeviceSampling& d = *in.device_sampling;
  rill::internal::DeviceSampling* w = out->mutable_device_sampling();
  w->set_temperature(d.temperature);
  w->set_top_k(d.top_k);
  w->set_top_p(d.top_p);
  w->set_min_p(d.min_p);
  w->set_uniform(d.uniform);
  w->set_descending_draw(d.descending_draw);
  w->set_top_logprobs(d.top_logprobs);
  for (const LogitEdit& e : d.edits) {
    rill::internal::LogitEdit* we = w->add_edits();
    we->set_token(e.token);
    we->set_repetition(e.repetition);
    we->set_subtract(e.subtract);
    we->set_add(e.add);
    we->set_mask(e.mask);
  }
}

SequenceChunk SequenceFromWire(const rill::internal::StepSequence& in) {
  SequenceChunk seq;
  seq.tokens.assign(in.tokens().begin(), in.tokens().end());
  seq.start_pos = in.start_pos();
  seq.block_table.assign(in.block_table().begin(), in.block_table().end());
  seq.all_logits = in.all_logits();
  if (!in.has_device_sampling()) return seq;
  const rill::internal::DeviceSampling& w = in.device_sampling();
  DeviceSampling d;
  d.temperature = w.temperature();
  d.top_k = w.top_k();
  d.top_p = w.top_p();
  d.min_p = w.min_p();
  d.uniform = w.uniform();
  d.descending_draw = w.descending_draw();
  d.top_logprobs = w.top_logprobs();
  d.edits.reserve(w.edits_size());
  for (const rill::internal::LogitEdit& we : w.edits()) {
    d.edits.push_back({we.token(), we.repetition(), we.subtract(), we.add(), we.mask()});
  }
  seq.device_sampling = std::move(d);
  return seq;
}

void SampledToWire(const DeviceSampledToken& in, rill::internal::SampledToken* out) {
  out->set_token(in.token);
  out->set_logprob(in.logprob);
  for (const auto& [id, logprob] : in.top) {
    out->add_top_ids(id);
    out->add_top_logprobs(logprob);
  }
}

DeviceSampledToken SampledFromWire(const rill::internal::SampledToken& in) {
  DeviceSampledToken t;
  t.token = in.token();
  t.logprob = in.logprob();
  const int n = std::min(in.top_ids_size(), in.top_logprobs_size());
  t.top.reserve(n);
  for (int i = 0; i < n; ++i) t.top.emplace_back(in.top_ids(i), in.top_logprobs(i));
  return t;
}

}  // namespace rill::worker
