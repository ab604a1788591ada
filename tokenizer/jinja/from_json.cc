#include "tokenizer/jinja/from_json.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace rill::tokenizer::jinja {

Value FromJson(const base::json::JsonValue& json) {
  using Type = base::json::JsonValue::Type;
  switch (json.type()) {
    case Type::kNull:
      return Value::None();
    case Type::kBool:
      return Value::Bool(json.bool_value());
    case Type::kNumber: {
      if (json.is_integer_literal()) {
        if (std::optional<int64_t> i = json.AsInt64()) return Value::Int(*i);
      }
      return Value::Float(json.number_value());
    }
    case Type::kString:
      return Value::String(json.string_value());
    case Type::kArray: {
      std::vector<Value> items;
      items.reserve(json.array_items().size());
      for (const base::json::JsonValue& item : json.array_items()) items.push_back(FromJson(item));
      return Value::List(std::move(items));
    }
    case Type::kObject: {
      // A str key is stored as itself (DictKey); the index keeps a large
      // object linear where DictData::Set would be quadratic.
      std::vector<std::pair<std::string, Value>> items;
      absl::flat_hash_map<std::string, size_t> position;
      for (const auto& [key, value] : json.object_members()) {
        auto [it, inserted] = position.emplace(key, items.size());
        if (inserted) {
          items.emplace_back(key, FromJson(value));
        } else {
          items[it->second].second = FromJson(value);
        }
      }
      return Value::Dict(std::move(items));
    }
  }
  return Value::None();
}

}  // namespace rill::tokenizer::jinja
