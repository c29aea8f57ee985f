// tseal diff A B [--json] [--atol X] [--rtol X] [--ulp N] [--report FILE.html]:
// value-level comparison. Exit 0 equal (bit-exact, or within the given tolerances),
// 1 different, 2 error.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common.h"
#include "progress.h"

namespace tseal {
namespace {

std::string num(double v, int digits = 4) { return tensorseal::number_text(v, digits); }

void print_human(const tensorseal::DiffReport& r, bool all) {
  using namespace tensorseal;
  std::printf("%s\n", r.verdict().c_str());
  std::vector<std::vector<std::string>> rows{{"STATUS", "TENSOR", "DTYPE", "SHAPE", "DIFFERING", "MAX_ABS", "MAX_REL",
                                              "MAX_ULP", "FIRST_DIFFERENCE", "NOTES"}};
  for (const auto& t : r.tensors) {
    if (!all && t.status == TensorStatus::kIdentical) continue;
    std::string dtype = t.dtype_changed() ? t.conversion() : std::string(name(t.dtype_a));
    std::string shape = shape_text(t.shape_a);
    if (t.shape_a != t.shape_b) shape += " -> " + shape_text(t.shape_b);
    const bool numbers = t.numeric && t.value_different > 0;
    std::string ulp = numbers ? num(t.max_ulp, 6) : "-";
    if (numbers && t.dtype_changed()) ulp += " (" + std::string(name(t.ulp_dtype)) + ")";
    std::string first = "-";
    if (t.first) {
      // Same rendering (NaN payloads, -0 vs 0 in short form): show the bits too.
      const bool same_text = t.first->a == t.first->b;
      first = shape_text(t.first->index) + ": " + t.first->a + (same_text ? " (" + t.first->a_bits + ")" : "") +
              " vs " + t.first->b + (same_text ? " (" + t.first->b_bits + ")" : "");
    }
    std::vector<std::string> notes;
    if (t.nan_payload) notes.push_back(fmt::format("{} NaN payloads differ (numerically equal)", t.nan_payload));
    if (t.nan_mismatch) notes.push_back(fmt::format("{} NaN mismatches", t.nan_mismatch));
    if (t.inf_mismatch) notes.push_back(fmt::format("{} inf mismatches", t.inf_mismatch));
    if (t.status == TensorStatus::kIncomparable) notes.push_back("raw dtype changed: not compared");
    if (t.numeric && !t.dtype_changed() && t.bit_different > t.value_different + t.nan_payload)
      notes.push_back(fmt::format("{} signed zeros differ (numerically equal)",
                                  t.bit_different - t.value_different - t.nan_payload));
    std::string note;
    for (std::size_t i = 0; i < notes.size(); ++i) note += (i ? "; " : "") + notes[i];
    rows.push_back({std::string(status_name(t.status)), t.path, dtype, shape,
                    t.status == TensorStatus::kShapeChanged || t.status == TensorStatus::kIncomparable
                        ? "-"
                        : fmt::format("{}/{}", t.value_different, t.numel),
                    numbers ? num(t.max_abs) : "-", numbers ? num(t.max_rel) : "-", ulp, first,
                    note.empty() ? "-" : note});
  }
  for (const auto& t : r.only_in_a)
    rows.push_back(
        {"only-in-a", t.path, std::string(name(t.dtype)), shape_text(t.shape), "-", "-", "-", "-", "-", "-"});
  for (const auto& t : r.only_in_b)
    rows.push_back(
        {"only-in-b", t.path, std::string(name(t.dtype)), shape_text(t.shape), "-", "-", "-", "-", "-", "-"});
  for (const auto& t : r.renamed)
    rows.push_back({"renamed", t.path_a + " -> " + t.path_b, std::string(name(t.dtype)), shape_text(t.shape), "0", "-",
                    "-", "-", "-", "same elements"});
  if (rows.size() > 1) {
    std::printf("\n");
    print_table(rows);
  }
  // What each dtype conversion cost, over all tensors that went through it.
  struct Cost {
    std::size_t tensors = 0;
    double abs = 0, rel = 0, ulp = 0;
    std::string coarse;
  };
  std::vector<std::pair<std::string, Cost>> costs;
  for (const auto& t : r.tensors) {
    if (!t.dtype_changed() || !t.numeric) continue;
    auto it = std::find_if(costs.begin(), costs.end(), [&](const auto& c) { return c.first == t.conversion(); });
    if (it == costs.end()) it = costs.insert(costs.end(), {t.conversion(), Cost{}});
    it->second.tensors++;
    it->second.abs = std::max(it->second.abs, t.max_abs);
    it->second.rel = std::max(it->second.rel, t.max_rel);
    it->second.ulp = std::max(it->second.ulp, t.max_ulp);
    it->second.coarse = std::string(name(t.ulp_dtype));
  }
  if (!costs.empty()) std::printf("\n");
  for (const auto& [conv, c] : costs)
    std::printf("conversion %s (%zu tensors): max abs error %s, max rel error %s, max %s ULP of %s%s\n", conv.c_str(),
                c.tensors, num(c.abs).c_str(), num(c.rel).c_str(), num(c.ulp).c_str(), c.coarse.c_str(),
                c.ulp <= 0.5 ? " (every value is the nearest one: correctly rounded)" : "");
  if (!r.values.empty()) {
    std::printf("\n");
    std::vector<std::vector<std::string>> vrows{{"VALUE", "A", "B"}};
    for (const auto& v : r.values) vrows.push_back({v.path, v.a.value_or("(absent)"), v.b.value_or("(absent)")});
    print_table(vrows);
  }
}

}  // namespace

Runner add_diff(CLI::App& app) {
  auto* cmd = app.add_subcommand("diff", "Compare two checkpoints value by value (exit 0 equal, 1 different, 2 error)");
  struct Args {
    std::string a, b, report;
    bool json = false, all = false;
    double atol = 0, rtol = 0;
    std::uint64_t ulp = 0;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("A", args->a, "first checkpoint")->required();
  cmd->add_option("B", args->b, "second checkpoint")->required();
  cmd->add_flag("--json", args->json, "print one JSON object (schema in docs/cli.md)");
  cmd->add_option("--atol", args->atol, "absolute tolerance: |a-b| <= atol + rtol*|b|")->check(CLI::NonNegativeNumber);
  cmd->add_option("--rtol", args->rtol, "relative tolerance")->check(CLI::NonNegativeNumber);
  cmd->add_option("--ulp", args->ulp, "tolerance in units in the last place");
  cmd->add_option("--report", args->report, "write a self-contained HTML report to this file");
  cmd->add_flag("--all", args->all, "list identical tensors too");
  auto threads = add_threads(cmd);
  auto limits = add_limits(cmd);
  auto format = add_input_format(cmd);
  auto quiet = add_quiet(cmd);
  return [args, threads, limits, format, quiet]() {
    using namespace tensorseal;
    Checkpoint a = read_file(args->a, read_options(*limits, *format));
    Checkpoint b = read_file(args->b, read_options(*limits, *format));
    DiffOptions o;
    o.atol = args->atol;
    o.rtol = args->rtol;
    o.ulp = args->ulp;
    o.threads = *threads;
    o.histogram = !args->report.empty();
    DiffReport r;
    {
      ProgressBar bar("comparing", *quiet);
      o.progress = bar.callback();
      r = diff(a, b, o);
    }
    if (!args->report.empty()) write_html_report(r, args->report);
    if (args->json)
      std::printf("%s\n", to_json(r).c_str());
    else
      print_human(r, args->all);
    return r.equal() ? kExitOk : kExitDifferent;
  };
}

}  // namespace tseal
