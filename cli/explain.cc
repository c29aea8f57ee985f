// tseal explain A B [--json]: why the bytes of two checkpoints differ. Exit 0 when the
// content is the same (whatever the bytes), 1 when the content differs, 2 on error.
#include "common.h"

namespace tseal {

Runner add_explain(CLI::App& app) {
  auto* cmd = app.add_subcommand("explain", "Explain why the bytes of two checkpoints differ");
  auto a = std::make_shared<std::string>();
  auto b = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  cmd->add_option("A", *a, "first checkpoint")->required();
  cmd->add_option("B", *b, "second checkpoint")->required();
  cmd->add_flag("--json", *as_json, "print one JSON object (schema in docs/cli.md)");
  auto limits = add_limits(cmd);
  return [a, b, as_json, limits]() {
    using namespace tensorseal;
    const Checkpoint ca = read_file(*a, read_options(*limits));
    const Checkpoint cb = read_file(*b, read_options(*limits));
    const ExplainReport r = explain(ca, cb);
    if (*as_json) {
      std::printf("%s\n", to_json(r).c_str());
      return r.same_content ? kExitOk : kExitDifferent;
    }
    if (r.bytes_identical) {
      std::printf("bytes identical: %s and %s are the same %llu bytes\n", a->c_str(), b->c_str(),
                  static_cast<unsigned long long>(r.size_a));
      return kExitOk;
    }
    if (r.bytes_compared)
      std::printf("bytes:    %llu of %llu/%llu bytes differ, the first at offset %llu\n",
                  static_cast<unsigned long long>(r.differing_bytes), static_cast<unsigned long long>(r.size_a),
                  static_cast<unsigned long long>(r.size_b),
                  static_cast<unsigned long long>(r.first_differing_byte.value_or(0)));
    if (r.same_content)
      std::printf("content:  identical (%s)\n", r.content_hash_a.c_str());
    else
      std::printf("content:  DIFFERENT (%s vs %s); %zu tensors differ, see `tseal diff %s %s`\n",
                  r.content_hash_a.c_str(), r.content_hash_b.c_str(), r.differing_tensors, a->c_str(), b->c_str());
    if (r.differences.empty()) {
      std::printf("no container difference found that explains the bytes\n");
    } else {
      std::printf("%s (%zu):\n", r.differences.size() == 1 ? "the only difference" : "differences",
                  r.differences.size());
      for (const auto& d : r.differences) {
        std::printf("  %s", d.topic.c_str());
        if (!d.where.empty()) std::printf(" at %s", d.where.c_str());
        std::printf(": %s vs %s\n", d.a ? ("`" + *d.a + "`").c_str() : "(absent)",
                    d.b ? ("`" + *d.b + "`").c_str() : "(absent)");
        std::printf("    %s\n", d.explanation.c_str());
      }
    }
    return r.same_content ? kExitOk : kExitDifferent;
  };
}

}  // namespace tseal
