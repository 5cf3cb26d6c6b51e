#include "engine/script/experiment_fields.hpp"

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <stdexcept>
#include <optional>
#include <type_traits>
#include <utility>

#include "engine/core/error.hpp"

namespace tandem {

using nlohmann::json;

namespace {

const char* const kTables = "engine/script/experiment_fields.cpp";
const char* const kSchema = "scripts/tandem/experiment.lua";

// One key of a schema record. kind and item are named as the Lua schema names them
// (number, integer, string, boolean, array, list, record, free), deduced from the
// member's C++ type where the key sets one member.
// Nothing here is a template of the record's type: a key's member is a place in the
// record (offset) and a table of functions for its C++ type (MemberOps), so the
// machinery compiles once, not once per record and lambda per key. Written with a
// std::function pair per key and templates per record, this file alone took 11 s of
// a fresh build's CPU at -O0, the longest of `make quickstart` (issue 33).
struct MemberOps {
  void (*read)(const void* sub, const json& value, void* member, const std::string& path);
  // The member as resolve() would write it, for comparing defaults; null for records.
  json (*write)(const void* member);
  // Records and lists of records: compares their own fields; null for scalars.
  void (*compare)(const void* sub, const json& lua_node, const json& resolved, const void* defaults,
                  const std::string& path, std::vector<std::string>& out);
};

struct FieldBase {
  std::string key, kind, item;  // item: a list's items' kind
  bool optional = false;        // the Lua default is nil: unset leaves the member's C++ default
  bool in_schema = true;        // false: a key resolve() adds to the record (source, overrides)
  // A member (or list item) narrower than int64: the largest value it holds, which
  // the Lua schema's max must not pass; 0: none to check.
  int64_t cpp_max = 0;
  // A key that sets one member of the record (or a record held in one): the member's
  // place in the record and what to do with it.
  size_t offset = 0;
  const MemberOps* ops = nullptr;
  std::shared_ptr<const std::vector<FieldBase>> sub;  // a record's own fields
  // A key read its own way (custom, record_as), on the whole record; all empty and
  // no ops: Lua alone uses the key (resolve() folds it into other keys).
  std::function<void(const json& value, void* record, const std::string& path)> read;
  // As MemberOps::write; empty: no C++ default to compare (the table says why).
  std::function<json(const void* record)> write;
  std::function<void(const json& lua_node, const json& resolved, const void* defaults, const std::string& path,
                     std::vector<std::string>& out)>
      compare_fields;

  bool reads() const { return ops || read; }
  bool writes() const { return (ops && ops->write) || write; }
};

// A key of a record of type S, and a record's keys: typed only so that a table
// cannot be given to a record of another type.
template <typename S>
struct Field : FieldBase {};
template <typename S>
struct Fields {
  Fields(std::initializer_list<Field<S>> fields) : list(fields.begin(), fields.end()) {}
  std::vector<FieldBase> list;
};

template <typename T>
struct is_vector : std::false_type {};
template <typename T>
struct is_vector<std::vector<T>> : std::true_type {};
template <typename T>
struct is_optional : std::false_type {};
template <typename T>
struct is_optional<std::optional<T>> : std::true_type {};

template <typename T>
std::string kind_of() {
  if constexpr (std::is_same_v<T, bool>) return "boolean";
  else if constexpr (std::is_integral_v<T>) return "integer";
  else if constexpr (std::is_floating_point_v<T>) return "number";
  else if constexpr (std::is_same_v<T, std::string>) return "string";
  else if constexpr (is_optional<T>::value) return kind_of<typename T::value_type>();
  else if constexpr (is_vector<T>::value) return "list";
  else static_assert(sizeof(T) == 0, "no schema kind for this member type");
}

template <typename T>
std::string item_kind_of() {
  if constexpr (is_vector<T>::value) return kind_of<typename T::value_type>();
  else return "";
}

// The scalar type a member holds (its items', for a list; its value's, optional).
template <typename T>
struct scalar_of {
  using type = T;
};
template <typename T>
struct scalar_of<std::optional<T>> : scalar_of<T> {};
template <typename T>
struct scalar_of<std::vector<T>> : scalar_of<T> {};

template <typename T>
constexpr bool is_int_member = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// x as a T. An integer member takes only an integer it can hold: a JSON double
// (1e308, which lua_to_json leaves a double) would otherwise be cast, wrapping to
// -9223372036854775808 or any other number.
template <typename T>
T get_checked(const json& x) {
  if constexpr (is_int_member<T>) {
    using L = std::numeric_limits<T>;
    bool fits = false;
    if (x.is_number_unsigned()) {
      fits = x.get<uint64_t>() <= static_cast<uint64_t>(L::max());
    } else if (x.is_number_integer()) {
      const int64_t v = x.get<int64_t>();
      fits = v >= 0 ? static_cast<uint64_t>(v) <= static_cast<uint64_t>(L::max())
                    : std::is_signed_v<T> && v >= static_cast<int64_t>(L::min());
    }
    if (x.is_number() && !fits)
      throw std::out_of_range("is not an integer from " + std::to_string(L::min()) + " to " +
                              std::to_string(L::max()) + ", the range of its C++ member");
  }
  return x.get<T>();
}

// An empty Lua table comes out of lua_to_json as {}: an empty list.
template <typename T>
void assign(const json& v, T& member) {
  if constexpr (is_optional<T>::value) {
    member = get_checked<typename T::value_type>(v);
  } else if constexpr (is_vector<T>::value) {
    member.clear();
    if (v.is_object() && v.empty()) return;
    for (const json& x : v) member.push_back(get_checked<typename T::value_type>(x));
  } else {
    member = get_checked<T>(v);
  }
}

template <typename T>
json as_json(const T& member) {
  if constexpr (is_optional<T>::value) return member ? json(*member) : json(nullptr);
  else return json(member);
}

// The member reached from s through a chain of member pointers.
template <typename T>
T& reach(T& s) {
  return s;
}
template <typename T, typename M, typename... Ms>
decltype(auto) reach(T& s, M m, Ms... ms) {
  return reach(s.*m, ms...);
}

// Where the member reached through members... lies in an S, in bytes from its start
// (measured on a default S; every S has the same layout).
template <typename S>
const S& probe() {
  static const S s{};
  return s;
}
template <typename S, typename... Ms>
size_t offset_of(Ms... members) {
  const S& s = probe<S>();
  return static_cast<size_t>(reinterpret_cast<const char*>(&reach(s, members...)) - reinterpret_cast<const char*>(&s));
}
void* member_at(void* s, size_t offset) { return static_cast<char*>(s) + offset; }
const void* member_at(const void* s, size_t offset) { return static_cast<const char*>(s) + offset; }

template <typename T>
const MemberOps* scalar_ops() {
  static const MemberOps ops{
      [](const void*, const json& v, void* member, const std::string&) { assign(v, *static_cast<T*>(member)); },
      [](const void* member) { return as_json(*static_cast<const T*>(member)); }, nullptr};
  return &ops;
}

// A key setting one member (through members..., e.g. &ExperimentConfig::optimizer,
// &OptimizerConfig::lr); optional members and lists may be unset.
template <typename S, typename... Ms>
Field<S> at(const char* key, Ms... members) {
  using T = std::remove_reference_t<decltype(reach(std::declval<S&>(), members...))>;
  Field<S> f;
  f.key = key;
  f.kind = kind_of<T>();
  f.item = item_kind_of<T>();
  f.optional = is_optional<T>::value || is_vector<T>::value;
  using Scalar = typename scalar_of<T>::type;
  if constexpr (is_int_member<Scalar> && sizeof(Scalar) < sizeof(int64_t))
    f.cpp_max = static_cast<int64_t>(std::numeric_limits<Scalar>::max());
  f.offset = offset_of<S>(members...);
  f.ops = scalar_ops<T>();
  return f;
}

// A key whose Lua default is nil: unset, the member keeps its C++ default.
template <typename S, typename... Ms>
Field<S> maybe(const char* key, Ms... members) {
  Field<S> f = at<S>(key, members...);
  f.optional = true;
  return f;
}

template <typename S>
Field<S> custom(const char* key, std::string kind, std::string item, bool optional,
                std::function<void(const json&, S&, const std::string&)> read,
                std::function<json(const S&)> write) {
  Field<S> f;
  f.key = key;
  f.kind = std::move(kind);
  f.item = std::move(item);
  f.optional = optional;
  if (read)
    f.read = [read = std::move(read)](const json& v, void* s, const std::string& path) {
      read(v, *static_cast<S*>(s), path);
    };
  if (write) f.write = [write = std::move(write)](const void* s) { return write(*static_cast<const S*>(s)); };
  return f;
}

// A key resolve() uses and folds into others; C++ reads nothing of it.
template <typename S>
Field<S> lua_only(const char* key, std::string kind, std::string item = "", bool optional = true) {
  return custom<S>(key, std::move(kind), std::move(item), optional, nullptr, nullptr);
}

// A key resolve() adds beyond the schema, for the record only.
template <typename S>
Field<S> resolved_only(const char* key) {
  Field<S> f = lua_only<S>(key, "");
  f.in_schema = false;
  return f;
}

std::string join(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

void read_fields(const std::vector<FieldBase>& fields, const json& record, void* into, const std::string& path) {
  const std::string where = path.empty() ? "the resolved experiment" : "'" + path + "'";
  TANDEM_CHECK_HINT(record.is_object(), std::string("a bug in ") + kSchema + "'s resolve(): it validates every record",
                    where, " is ", record.type_name(), ", not a table");
  for (const auto& [key, value] : record.items()) {
    bool known = false;
    for (const FieldBase& f : fields) known = known || f.key == key;
    if (!known)
      TANDEM_FAIL_HINT(std::string("add '") + key + "' to the table of '" + (path.empty() ? "experiment" : path) +
                           "' in " + kTables + " (the member it sets, or lua_only if Lua alone uses it)",
                       where, " has the key '", join(path, key), "', which no field of ExperimentConfig reads");
  }
  for (const FieldBase& f : fields) {
    const std::string full = join(path, f.key);
    const bool unset = !record.contains(f.key) || record.at(f.key).is_null();
    if (unset && !f.optional && f.reads())
      TANDEM_FAIL_HINT(std::string("give '") + full + "' a default in " + kSchema + ", or drop it from " + kTables,
                       "the resolved experiment has no '", full, "', which ExperimentConfig reads");
    if (unset || !f.reads()) continue;
    try {
      if (f.ops)
        f.ops->read(f.sub.get(), record.at(f.key), member_at(into, f.offset), full);
      else
        f.read(record.at(f.key), into, full);
    } catch (const std::out_of_range& e) {
      TANDEM_FAIL_HINT(std::string("choose a value in that range; ") + kSchema + " should have refused it: give '" +
                           full + "' a max there (test_schema_agreement names every such key)",
                       "'", full, "' = ", record.at(f.key).dump(), " ", e.what());
    } catch (const json::exception& e) {
      TANDEM_FAIL_HINT(std::string("make the kind of '") + full + "' in " + kSchema + " and its member in " +
                           "engine/train/config.hpp agree (test_schema_agreement names every such key)",
                       "'", full, "' = ", record.at(f.key).dump(), " does not fit its ExperimentConfig member: ",
                       e.what());
    }
  }
}

bool same_value(const json& lua, const json& cpp) {
  const auto empty = [](const json& j) { return j.is_null() || ((j.is_object() || j.is_array()) && j.empty()); };
  if (empty(lua) && empty(cpp)) return true;
  return lua == cpp;
}

// A key read into a C++ int needs a Lua max it can hold, so that resolve() refuses,
// naming the range, what C++ could only wrap around.
void check_cpp_max(const FieldBase& f, const json& node, const std::string& full, std::vector<std::string>& out) {
  if (f.cpp_max == 0) return;
  const json& scalar = node.value("kind", "") == "list" && node.contains("item") ? node.at("item") : node;
  const json max = scalar.value("max", json());
  if (!max.is_number() || max.get<double>() > static_cast<double>(f.cpp_max))
    out.push_back(full + ": its C++ member holds at most " + std::to_string(f.cpp_max) + ", but " + kSchema +
                  (max.is_number() ? " lets it reach " + max.dump() : std::string(" gives it no max")));
}

void compare_fields(const std::vector<FieldBase>& fields, const json& lua_node, const json& resolved, const void* defaults,
                    const std::string& path, std::vector<std::string>& out) {
  const json lua_fields = lua_node.value("fields", json::object());
  for (const auto& [key, node] : lua_fields.items()) {
    bool known = false;
    for (const FieldBase& f : fields) known = known || (f.in_schema && f.key == key);
    if (!known) out.push_back(join(path, key) + ": in " + kSchema + ", but in no table of " + kTables);
  }
  for (const FieldBase& f : fields) {
    if (!f.in_schema) continue;
    const std::string full = join(path, f.key);
    if (!lua_fields.contains(f.key)) {
      out.push_back(full + ": in " + kTables + ", but not in " + kSchema);
      continue;
    }
    const json& node = lua_fields.at(f.key);
    const std::string lua_kind = node.value("kind", "");
    if (lua_kind != f.kind) out.push_back(full + ": a " + lua_kind + " in " + kSchema + ", a " + f.kind + " in C++");
    if (lua_kind == "list") {
      const std::string lua_item = node.contains("item") ? node.at("item").value("kind", "") : "";
      if (lua_item != f.item)
        out.push_back(full + ": a list of " + lua_item + " in " + kSchema + ", of " + f.item + " in C++");
    }
    check_cpp_max(f, node, full, out);
    const bool lua_optional =
        lua_kind != "record" && !node.contains("default") && !node.value("required", false);
    if (lua_kind != "record" && lua_optional != f.optional)
      out.push_back(full + (lua_optional ? ": may be unset in " : ": has a default in ") + kSchema + ", but " +
                    (f.optional ? "may be unset in C++" : "is always read in C++"));
    const json value = resolved.is_object() && resolved.contains(f.key) ? resolved.at(f.key) : json();
    if (f.ops && f.ops->compare) {
      f.ops->compare(f.sub.get(), node, value, member_at(defaults, f.offset), full, out);
    } else if (f.compare_fields) {
      f.compare_fields(node, value, defaults, full, out);
    } else if (f.writes() && !f.optional) {  // a key Lua leaves unset has no default to compare
      const json cpp = f.ops ? f.ops->write(member_at(defaults, f.offset)) : f.write(defaults);
      if (!same_value(value, cpp))
        out.push_back(full + ": default " + value.dump() + " in " + kSchema + ", " + cpp.dump() +
                      " in ExperimentConfig");
    }
  }
}

const MemberOps* record_ops() {
  static const MemberOps ops{
      [](const void* sub, const json& v, void* member, const std::string& path) {
        read_fields(*static_cast<const std::vector<FieldBase>*>(sub), v, member, path);
      },
      nullptr,
      [](const void* sub, const json& node, const json& resolved, const void* defaults, const std::string& path,
         std::vector<std::string>& out) {
        compare_fields(*static_cast<const std::vector<FieldBase>*>(sub), node, resolved, defaults, path, out);
      }};
  return &ops;
}

// A record read into the member reached through members... (none: into S itself,
// for a Lua record whose keys C++ keeps elsewhere).
template <typename S, typename Sub, typename... Ms>
Field<S> record(const char* key, Fields<Sub> fields, Ms... members) {
  static_assert(std::is_same_v<std::remove_reference_t<decltype(reach(std::declval<S&>(), members...))>, Sub>,
                "record(): the members reach a Sub");
  Field<S> f;
  f.key = key;
  f.kind = "record";
  f.offset = offset_of<S>(members...);
  f.ops = record_ops();
  f.sub = std::make_shared<const std::vector<FieldBase>>(std::move(fields.list));
  return f;
}

// A record read into a fresh Sub that store() then files (an optional profile);
// load() gives the Sub a default S holds, for comparing defaults.
template <typename S, typename Sub>
Field<S> record_as(const char* key, Fields<Sub> fields, std::function<void(S&, Sub)> store,
                   std::function<Sub(const S&)> load) {
  Field<S> f;
  f.key = key;
  f.kind = "record";
  auto sub = std::make_shared<const std::vector<FieldBase>>(std::move(fields.list));
  f.read = [=](const json& v, void* s, const std::string& path) {
    Sub into;
    read_fields(*sub, v, &into, path);
    store(*static_cast<S*>(s), std::move(into));
  };
  f.compare_fields = [=](const json& node, const json& resolved, const void* defaults, const std::string& path,
                         std::vector<std::string>& out) {
    const Sub d = load(*static_cast<const S*>(defaults));
    compare_fields(*sub, node, resolved, &d, path, out);
  };
  return f;
}

template <typename Item>
const MemberOps* records_ops() {
  static const MemberOps ops{
      [](const void* sub, const json& v, void* member, const std::string& path) {
        const auto& fields = *static_cast<const std::vector<FieldBase>*>(sub);
        std::vector<Item>& list = *static_cast<std::vector<Item>*>(member);
        list.clear();
        if (v.is_object() && v.empty()) return;
        for (size_t i = 0; i < v.size(); ++i) {
          Item item;
          read_fields(fields, v.at(i), &item, path + "[" + std::to_string(i + 1) + "]");
          list.push_back(std::move(item));
        }
      },
      nullptr,
      [](const void* sub, const json& node, const json& resolved, const void* defaults, const std::string& path,
         std::vector<std::string>& out) {
        const std::vector<Item>& list = *static_cast<const std::vector<Item>*>(defaults);
        if (!resolved.is_array() || resolved.empty() || list.empty()) {
          out.push_back(path + ": no entry on each side to compare its defaults with (give one empty entry)");
          return;
        }
        compare_fields(*static_cast<const std::vector<FieldBase>*>(sub), node.value("item", json::object()),
                       resolved.at(0), &list.front(), path + "[1]", out);
      }};
  return &ops;
}

// A list of records, read into the vector reached through members...; its
// defaults are compared on the first entry of each side.
template <typename S, typename Item, typename... Ms>
Field<S> records(const char* key, Fields<Item> fields, Ms... members) {
  static_assert(
      std::is_same_v<std::remove_reference_t<decltype(reach(std::declval<S&>(), members...))>, std::vector<Item>>,
      "records(): the members reach a std::vector<Item>");
  Field<S> f;
  f.key = key;
  f.kind = "list";
  f.item = "record";
  f.optional = true;
  f.offset = offset_of<S>(members...);
  f.ops = records_ops<Item>();
  f.sub = std::make_shared<const std::vector<FieldBase>>(std::move(fields.list));
  return f;
}

// --- The model: resolve() replaces the model's name with the model it built.

Shape to_shape(const json& j) {
  Shape s;
  for (const auto& d : j) s.push_back(d.get<int64_t>());
  return s;
}

const json& member_of(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key))
    TANDEM_FAIL_HINT(std::string("a bug in ") + kSchema + "'s build_model(): it returns {name, file, input, classes, "
                         "layers}",
                     "the resolved model has no '", where, key, "'");
  return j.at(key);
}

LayerSpec to_layer(const json& l) {
  LayerSpec ls;
  ls.type = member_of(l, "type", "model.layers[].").get<std::string>();
  ls.where = l.value("where", std::string("?"));
  const json& args = member_of(l, "args", "model.layers[].");
  if (args.is_object())
    for (const auto& [k, v] : args.items()) ls.args[k] = v.get<double>();
  for (const auto& [key, list] : {std::pair<const char*, std::vector<LayerSpec>*>{"body", &ls.body},
                                  {"shortcut", &ls.shortcut}})
    if (l.contains(key) && l.at(key).is_array())
      for (const auto& sub : l.at(key)) list->push_back(to_layer(sub));
  return ls;
}

ModelSpec to_model(const json& m) {
  ModelSpec spec;
  spec.name = member_of(m, "name", "model.").get<std::string>();
  spec.input = to_shape(member_of(m, "input", "model."));
  spec.classes = member_of(m, "classes", "model.").get<int>();
  for (const auto& l : member_of(m, "layers", "model.")) spec.layers.push_back(to_layer(l));
  return spec;
}

// --- The tables, one per record of the Lua schema, in its order.

using E = ExperimentConfig;

Fields<DataConfig> data_fields() {
  using D = DataConfig;
  Field<D> shape = at<D>("shape", &D::shape);
  shape.kind = "array";  // a non-empty list of positive integers
  shape.item = "";
  shape.optional = false;
  Field<D> files = at<D>("files", &D::files);
  files.optional = false;  // a list with a default: the fortunes corpus
  Field<D> train = at<D>("train", &D::train);
  train.optional = false;  // lists with a default: none
  Field<D> validation_files = at<D>("validation_files", &D::validation_files);
  validation_files.optional = false;
  return {at<D>("name", &D::name),          at<D>("dir", &D::dir),
          shape,                             at<D>("classes", &D::classes),
          at<D>("train_size", &D::train_size), at<D>("test_size", &D::test_size),
          at<D>("seed", &D::seed),           files,
          at<D>("seq_len", &D::seq_len),     at<D>("validation", &D::validation),
          train,                             validation_files,
          at<D>("vocab", &D::vocab),         at<D>("format", &D::format),
          at<D>("validation_windows", &D::validation_windows), at<D>("augment", &D::augment),
          at<D>("on_device", &D::on_device)};
}

Fields<ScheduleConfig> schedule_fields() {
  using S = ScheduleConfig;
  return {at<S>("kind", &S::kind), at<S>("warmup_iterations", &S::warmup_iterations),
          at<S>("step_epochs", &S::step_epochs), at<S>("gamma", &S::gamma), at<S>("min_lr", &S::min_lr)};
}

Fields<StopConfig> stop_fields() {
  using S = StopConfig;
  return {at<S>("epochs", &S::epochs), at<S>("target_accuracy", &S::target_accuracy),
          at<S>("target_loss", &S::target_loss),
          at<S>("max_iterations", &S::max_iterations), at<S>("max_seconds", &S::max_seconds)};
}

Fields<SimConfig> sim_fields() {
  using S = SimConfig;
  return {at<S>("noise", &S::noise),           at<S>("noise_distribution", &S::noise_distribution),
          at<S>("seed", &S::seed),             at<S>("latency_us", &S::latency_us),
          at<S>("bandwidth_gb_s", &S::bandwidth_gb_s), at<S>("ranks_per_host", &S::ranks_per_host),
          at<S>("trace_every", &S::trace_every),
          at<S>("noise_scale", &S::noise_scale),       at<S>("noise_growth", &S::noise_growth)};
}

Fields<CheckpointConfig> checkpoint_fields() {
  using C = CheckpointConfig;
  return {at<C>("every", &C::every), at<C>("every_s", &C::every_s), at<C>("keep", &C::keep),
          at<C>("final", &C::final)};
}

Fields<ElasticConfig> elastic_fields() {
  using C = ElasticConfig;
  return {at<C>("min_workers", &C::min_workers), at<C>("max_restarts", &C::max_restarts),
          at<C>("probe_timeout_s", &C::probe_timeout_s)};
}

Fields<CommConfig> comm_fields() {
  using C = CommConfig;
  return {at<C>("bucket_mb", &C::bucket_mb), at<C>("dtype", &C::dtype)};
}

Fields<FaultConfig> fault_fields() {
  using F = FaultConfig;
  return {at<F>("rank", &F::rank), at<F>("iteration", &F::iteration), at<F>("kind", &F::kind),
          at<F>("during", &F::during)};
}

Fields<PlanConfig> plan_fields() {
  using P = PlanConfig;
  return {at<P>("kind", &P::kind), at<P>("batches", &P::batches), at<P>("micro_batches", &P::micro_batches)};
}

// The Lua schema's `sync` record: C++ keeps the sync plan in plan.sync and the
// parameter server's slow momentum with the optimizer.
Fields<E> sync_fields() {
  using Sync = PlanConfig::Sync;
  return {at<E>("mode", &E::plan, &PlanConfig::sync, &Sync::mode),
          at<E>("groups", &E::plan, &PlanConfig::sync, &Sync::groups),
          at<E>("k", &E::plan, &PlanConfig::sync, &Sync::k),
          at<E>("local_steps", &E::plan, &PlanConfig::sync, &Sync::local_steps),
          at<E>("staleness", &E::plan, &PlanConfig::sync, &Sync::staleness),
          at<E>("sync_every", &E::plan, &PlanConfig::sync, &Sync::sync_every),
          at<E>("slow_momentum", &E::optimizer, &OptimizerConfig::slow_momentum)};
}

// policy.global_batch = {min, max}, resolved by experiment.lua (both global_batch
// when not set).
Fields<PolicyConfig> global_batch_range_fields() {
  using P = PolicyConfig;
  return {at<P>("min", &P::global_batch_min), at<P>("max", &P::global_batch_max)};
}

Fields<PolicyConfig> policy_fields() {
  using P = PolicyConfig;
  return {maybe<P>("file", &P::file),
          custom<P>(
              "params", "free", "", false, [](const json& v, P& p, const std::string&) { p.params_json = v.dump(); },
              [](const P& p) { return json::parse(p.params_json); }),
          at<P>("budget_ms", &P::budget_ms),
          at<P>("memory_mb", &P::memory_mb),
          at<P>("init_budget_ms", &P::init_budget_ms),
          at<P>("max_failures", &P::max_failures),
          at<P>("history", &P::history),
          at<P>("watch", &P::watch),
          at<P>("min_batch", &P::min_batch),
          at<P>("max_batch", &P::max_batch),
          record<P, P>("global_batch", global_batch_range_fields())};
}

// A measured curve: kept only when it has points.
Fields<DeviceProfile> profile_fields() {
  using P = DeviceProfile;
  return {at<P>("batch", &P::batch), at<P>("ms", &P::ms)};
}

Fields<WorkerEmulation> emulated_worker_fields() {
  using W = WorkerEmulation;
  return {maybe<W>("speed", &W::speed),
          record_as<W, DeviceProfile>(
              "profile", profile_fields(),
              [](W& w, DeviceProfile p) {
                if (!p.batch.empty() || !p.ms.empty()) w.profile = std::move(p);
              },
              [](const W& w) { return w.profile.value_or(DeviceProfile{}); }),
          maybe<W>("comm_delay_ms", &W::comm_delay_ms),
          // With emulation.memory, resolve() turns it into the worker's policy.max_batch.
          lua_only<W>("memory_mb", "number")};
}

Fields<SlowdownEvent> event_fields() {
  using S = SlowdownEvent;
  return {at<S>("worker", &S::worker), at<S>("speed", &S::speed), at<S>("from", &S::from), maybe<S>("to", &S::to)};
}

// {min, max} in the experiment, two members in C++.
template <typename T>
Field<RandomSlowdowns> range(const char* key, T RandomSlowdowns::*min, T RandomSlowdowns::*max) {
  return custom<RandomSlowdowns>(
      key, "list", kind_of<T>(), true,
      [=](const json& v, RandomSlowdowns& r, const std::string&) {
        if (v.is_array() && v.size() == 2) {
          r.*min = v.at(0).get<T>();
          r.*max = v.at(1).get<T>();
        }
      },
      [=](const RandomSlowdowns& r) { return json::array({r.*min, r.*max}); });
}

Fields<RandomSlowdowns> random_fields() {
  using R = RandomSlowdowns;
  return {at<R>("probability", &R::probability), range<int64_t>("duration", &R::min_duration, &R::max_duration),
          range<double>("speed", &R::min_speed, &R::max_speed), at<R>("seed", &R::seed)};
}

// Shorthand per-worker lists (speeds, comm_delay_ms), folded into one entry per
// worker; read after `workers`, which the table lists first.
Field<EmulationConfig> per_worker(const char* key, double WorkerEmulation::*member) {
  return custom<EmulationConfig>(
      key, "list", "number", true,
      [=](const json& v, EmulationConfig& c, const std::string&) {
        std::vector<double> values;
        assign(v, values);
        if (c.workers.size() < values.size()) c.workers.resize(values.size());
        for (size_t i = 0; i < values.size(); ++i) c.workers[i].*member = values[i];
      },
      [](const EmulationConfig&) { return json(); });  // C++ keeps them in workers
}

Fields<EmulationConfig> emulation_fields() {
  using C = EmulationConfig;
  return {maybe<C>("enabled", &C::enabled),  // resolve() sets it: whether any other key is
          at<C>("reference", &C::reference),
          records<C, WorkerEmulation>("workers", emulated_worker_fields(), &C::workers),
          per_worker("speeds", &WorkerEmulation::speed),
          per_worker("comm_delay_ms", &WorkerEmulation::comm_delay_ms),
          // The model's memory by batch: resolve() turns workers' memory_mb into policy.max_batch with it.
          lua_only<C>("memory", "record"),
          records<C, SlowdownEvent>("events", event_fields(), &C::events),
          record<C, RandomSlowdowns>("random", random_fields(), &C::random),
          maybe<C>("speed_trace", &C::speed_trace),
          record_as<C, DeviceProfile>(
              "calibration", {at<DeviceProfile>("batch", &DeviceProfile::batch),
                              at<DeviceProfile>("ms", &DeviceProfile::ms),
                              at<DeviceProfile>("host_ms", &DeviceProfile::host_ms)},
              [](C& c, DeviceProfile p) {
                if (p.batch.empty() && p.ms.empty()) return;
                TANDEM_CHECK_HINT(p.batch.size() == p.ms.size(), "copy both lists from a run's calibration.json",
                                  "emulation.calibration has ", p.batch.size(), " batches but ", p.ms.size(),
                                  " times");
                TANDEM_CHECK_HINT(p.host_ms.empty() || p.host_ms.size() == p.batch.size(),
                                  "copy the lists from a run's calibration.json", "emulation.calibration has ",
                                  p.batch.size(), " batches but ", p.host_ms.size(), " host times");
                c.calibration = std::move(p);
              },
              [](const C& c) { return c.calibration.value_or(DeviceProfile{}); })};
}

Fields<E> experiment_fields() {
  return {
      // resolve() names the run after its file when the experiment does not.
      custom<E>(
          "name", "string", "", true, [](const json& v, E& c, const std::string&) { c.name = v.get<std::string>(); },
          nullptr),
      // Required, so no default; resolve() replaces the name with the model it built.
      custom<E>(
          "model", "string", "", false, [](const json& v, E& c, const std::string&) { c.model = to_model(v); },
          nullptr),
      // Given to the model's function in resolve(); the built model carries its effect.
      lua_only<E>("model_args", "free", "", false),
      record<E, DataConfig>("data", data_fields(), &E::data),
      at<E>("global_batch", &E::global_batch),
      at<E>("optimizer", &E::optimizer, &OptimizerConfig::name),
      at<E>("lr", &E::optimizer, &OptimizerConfig::lr),
      at<E>("momentum", &E::optimizer, &OptimizerConfig::momentum),
      at<E>("weight_decay", &E::optimizer, &OptimizerConfig::weight_decay),
      at<E>("nesterov", &E::optimizer, &OptimizerConfig::nesterov),
      at<E>("beta1", &E::optimizer, &OptimizerConfig::beta1),
      at<E>("beta2", &E::optimizer, &OptimizerConfig::beta2),
      at<E>("eps", &E::optimizer, &OptimizerConfig::eps),
      at<E>("clip_grad_norm", &E::optimizer, &OptimizerConfig::clip_grad_norm),
      at<E>("accumulate", &E::accumulate),
      at<E>("fused_step", &E::fused_step),
      at<E>("lr_scaling", &E::lr_scaling),
      record<E, ScheduleConfig>("schedule", schedule_fields(), &E::schedule),
      record<E, StopConfig>("stop", stop_fields(), &E::stop),
      at<E>("eval_every", &E::eval_every),
      at<E>("log_every", &E::log_every),
      at<E>("eval_batch", &E::eval_batch),
      at<E>("seed", &E::seed),
      at<E>("blas_threads", &E::blas_threads),
      at<E>("device", &E::device, &DeviceConfig::kind),
      at<E>("devices", &E::device, &DeviceConfig::per_worker),
      at<E>("precision", &E::device, &DeviceConfig::precision),
      at<E>("log_level", &E::log_level),
      at<E>("out_dir", &E::out_dir),
      record<E, SimConfig>("sim", sim_fields(), &E::sim),
      at<E>("console", &E::console),
      at<E>("save_params", &E::save_params),
      maybe<E>("init_from", &E::init_from),
      at<E>("init_from_strict", &E::init_from_strict),
      at<E>("tensorboard", &E::tensorboard),
      at<E>("workers", &E::workers),
      at<E>("hostfile", &E::hostfile),
      at<E>("hosts", &E::hosts),
      at<E>("collective_timeout_s", &E::collective_timeout_s),
      record<E, CommConfig>("comm", comm_fields(), &E::comm),
      record<E, CheckpointConfig>("checkpoint", checkpoint_fields(), &E::checkpoint),
      record<E, ElasticConfig>("elastic", elastic_fields(), &E::elastic),
      at<E>("max_nonfinite_steps", &E::max_nonfinite_steps),
      records<E, FaultConfig>("faults", fault_fields(), &E::faults),
      record<E, PlanConfig>("plan", plan_fields(), &E::plan),
      record<E, E>("sync", sync_fields()),
      record<E, PolicyConfig>("policy", policy_fields(), &E::policy),
      record<E, EmulationConfig>("emulation", emulation_fields(), &E::emulation),
      resolved_only<E>("source"),
      resolved_only<E>("overrides"),
  };
}

}  // namespace

ExperimentConfig config_from_resolved(json& resolved) {
  ExperimentConfig c;
  read_fields(experiment_fields().list, resolved, &c, "");
  // Unset optional keys are written as null, so config.json shows every key.
  json& stop = resolved.at("stop");
  for (const char* k : {"target_accuracy", "target_loss", "max_iterations", "max_seconds"})
    if (!stop.contains(k)) stop[k] = nullptr;
  return c;
}

std::vector<std::string> schema_disagreements(const json& lua_schema, const json& resolved,
                                              const ExperimentConfig& defaults) {
  std::vector<std::string> out;
  compare_fields(experiment_fields().list, lua_schema, resolved, &defaults, "", out);
  return out;
}

}  // namespace tandem
