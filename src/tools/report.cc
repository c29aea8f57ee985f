// The HTML diff report: one self-contained page (inline CSS, JS and SVG; nothing is
// fetched), written atomically.
//
//   #summary         the verdict and the counts
//   #error-plot      max absolute error per tensor in model order, log scale (SVG)
//   #ulp-histograms  ULP error histograms of the worst tensors (SVG)
//   #tensor-table    every compared tensor; click a header to sort (inline JS)
//   #one-sided, #values  tensors on one side only / renamed, other values that differ
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "io/sink.h"
#include "tensorseal/diff.h"

namespace tensorseal {
namespace {

std::string esc(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string num(double v, int digits = 4) { return number_text(v, digits); }

// Sort key for a table cell: finite numbers as they are, inf as a huge number.
std::string key(double v) {
  if (std::isnan(v)) return "-1";
  if (std::isinf(v)) return "1e308";
  return num(v, 17);
}

// Full range of a ULP bucket: "0", "1", "2-3", "4-7", ..., then powers of two.
std::string bucket_label(std::size_t k) {
  if (k == 0) return "0";
  if (k == 1) return "1";
  if (k >= 64) return "2^63 or more";
  const std::uint64_t lo = std::uint64_t{1} << (k - 1), hi = (std::uint64_t{1} << k) - 1;
  if (k <= 14) return std::to_string(lo) + "-" + std::to_string(hi);
  return "2^" + std::to_string(k - 1) + " to 2^" + std::to_string(k) + "-1";
}

// Axis label of a bucket: its lower bound, compact ("0", "1", "2", "4", ..., "512", "1k", "1M").
std::string bucket_tick(std::size_t k) {
  if (k == 0) return "0";
  const int e = static_cast<int>(k) - 1;  // lower bound 2^e
  if (e < 10) return std::to_string(1u << e);
  const char* unit[] = {"k", "M", "G", "T", "P", "E"};
  const int u = e / 10;
  return std::to_string(1u << (e % 10)) + unit[std::min(u, 6) - 1];
}

constexpr const char* kStyle = R"(
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d2330;background:#fff}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:28px 0 8px}
.files{color:#555;font-family:ui-monospace,Menlo,monospace;font-size:12px}
#summary{padding:12px 16px;border-radius:6px;margin:16px 0;font-size:16px}
#summary.equal{background:#e6f4ea;border:1px solid #9bd3ae} #summary.differ{background:#fdecea;border:1px solid #f1a9a0}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin-top:8px;font-size:13px}
.card{background:#fff8;border:1px solid #ccc;border-radius:4px;padding:4px 10px}
table{border-collapse:collapse;font-size:12px;width:100%}
th,td{border-bottom:1px solid #e3e3e3;padding:4px 8px;text-align:left;white-space:nowrap}
th{background:#f4f5f7;cursor:pointer;user-select:none;position:sticky;top:0} th:hover{background:#e8eaee}
td.num{text-align:right;font-family:ui-monospace,Menlo,monospace} td.path{font-family:ui-monospace,Menlo,monospace}
tr.identical td.st{color:#1e7d34} tr.different td.st{color:#c5221f;font-weight:600}
tr.within-tolerance td.st,tr.numerically-equal td.st{color:#b06000}
tr.shape-changed td.st,tr.incomparable td.st{color:#8430ce}
svg{background:#fbfbfc;border:1px solid #e3e3e3;border-radius:4px}
svg text{font:10px system-ui,sans-serif;fill:#444}
.hists{display:flex;flex-wrap:wrap;gap:12px}
.note{color:#666;font-size:12px}
)";

constexpr const char* kScript = R"(
document.querySelectorAll('#tensor-table th').forEach(function(th, col){
  th.addEventListener('click', function(){
    var tbody = th.closest('table').tBodies[0];
    var rows = Array.prototype.slice.call(tbody.rows);
    var asc = th.getAttribute('data-dir') !== 'asc';
    th.parentNode.querySelectorAll('th').forEach(function(h){ h.removeAttribute('data-dir'); });
    th.setAttribute('data-dir', asc ? 'asc' : 'desc');
    var numeric = th.hasAttribute('data-num');
    rows.sort(function(a, b){
      var x = a.cells[col].getAttribute('data-v'), y = b.cells[col].getAttribute('data-v');
      var c = numeric ? (parseFloat(x) - parseFloat(y)) : (x < y ? -1 : x > y ? 1 : 0);
      return asc ? c : -c;
    });
    rows.forEach(function(r){ tbody.appendChild(r); });
  });
});
)";

// Max absolute error per tensor in model order, log10 scale; identical tensors sit on
// the baseline in green.
std::string error_plot(const DiffReport& r) {
  const double W = 960, H = 280, L = 56, R = 12, T = 14, B = 30;
  std::vector<double> errs;
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& t : r.tensors) {
    const double e = (t.numeric && t.max_abs > 0) ? t.max_abs : 0;
    errs.push_back(e);
    if (e > 0 && std::isfinite(e)) {
      lo = std::min(lo, std::floor(std::log10(e)));
      hi = std::max(hi, std::ceil(std::log10(e)));
    }
  }
  if (!(lo <= hi)) lo = -8, hi = 0;
  if (hi == lo) hi = lo + 1;
  const double top = hi + 0.5;  // room for inf
  std::string s = "<svg id=\"error-plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(W) + "\" height=\"" +
                  num(H) + "\" viewBox=\"0 0 " + num(W) + " " + num(H) + "\" role=\"img\">";
  s += "<title>max absolute error per tensor (log scale)</title>";
  auto y_of = [&](double decade) { return T + (H - T - B) * (top - decade) / (top - (lo - 0.5)); };
  for (double d = lo; d <= hi; d += 1) {
    const double y = y_of(d);
    s += "<line x1=\"" + num(L) + "\" x2=\"" + num(W - R) + "\" y1=\"" + num(y) + "\" y2=\"" + num(y) +
         "\" stroke=\"#e0e0e0\"/><text x=\"" + num(L - 4) + "\" y=\"" + num(y + 3) + "\" text-anchor=\"end\">1e" +
         num(d) + "</text>";
  }
  const double base = H - B;
  s += "<line x1=\"" + num(L) + "\" x2=\"" + num(W - R) + "\" y1=\"" + num(base) + "\" y2=\"" + num(base) +
       "\" stroke=\"#888\"/><text x=\"" + num(L - 4) + "\" y=\"" + num(base + 3) + "\" text-anchor=\"end\">0</text>";
  s += "<text x=\"" + num((L + W - R) / 2) + "\" y=\"" + num(H - 6) +
       "\" text-anchor=\"middle\">tensors in model order (" + std::to_string(errs.size()) + ")</text>";
  const double n = std::max<double>(1, static_cast<double>(errs.size()));
  const double step = (W - L - R) / n;
  const double bar = std::max(1.0, std::min(12.0, step * 0.7));
  for (std::size_t i = 0; i < errs.size(); ++i) {
    const auto& t = r.tensors[i];
    const double x = L + step * (static_cast<double>(i) + 0.5);
    const double e = errs[i];
    const std::string tip = "<title>" + esc(t.path) + ": " + std::string(status_name(t.status)) +
                            (e > 0 ? ", max abs error " + num(e) : "") + "</title>";
    if (e > 0) {
      const double y = std::isfinite(e) ? y_of(std::log10(e)) : y_of(top);
      s += "<rect class=\"bar\" x=\"" + num(x - bar / 2) + "\" y=\"" + num(y) + "\" width=\"" + num(bar) +
           "\" height=\"" + num(std::max(1.0, base - y)) + "\" fill=\"" + (r.tensor_equal(t) ? "#e8a33d" : "#d93025") +
           "\">" + tip + "</rect>";
    } else {
      const char* color = t.status == TensorStatus::kIdentical ? "#34a853"
                          : (t.status == TensorStatus::kShapeChanged || t.status == TensorStatus::kIncomparable)
                              ? "#8430ce"
                              : "#e8a33d";
      s += "<circle class=\"dot\" cx=\"" + num(x) + "\" cy=\"" + num(base - 3) + "\" r=\"" +
           num(std::min(3.0, std::max(1.0, step / 2))) + "\" fill=\"" + color + "\">" + tip + "</circle>";
    }
  }
  return s + "</svg>";
}

std::string histogram_svg(const TensorDiff& t) {
  const double W = 300, H = 170, L = 34, R = 14, T = 22, B = 40;
  const auto& h = t.ulp_histogram;
  std::uint64_t peak = 1;
  for (auto c : h) peak = std::max(peak, c);
  const double top = std::log10(static_cast<double>(peak) + 1);
  std::string s = "<svg class=\"ulp-hist\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(W) + "\" height=\"" +
                  num(H) + "\" viewBox=\"0 0 " + num(W) + " " + num(H) + "\">";
  std::string title = t.path;
  if (title.size() > 44) title = "\xe2\x80\xa6" + title.substr(title.size() - 43);
  s += "<text x=\"" + num(W / 2) + "\" y=\"14\" text-anchor=\"middle\" font-weight=\"600\">" + esc(title) +
       " (ULP in " + std::string(name(t.ulp_dtype)) + ")</text>";
  const double n = std::max<double>(1, static_cast<double>(h.size()));
  const double step = (W - L - R) / n;
  const double base = H - B;
  s += "<line x1=\"" + num(L) + "\" x2=\"" + num(W - R) + "\" y1=\"" + num(base) + "\" y2=\"" + num(base) +
       "\" stroke=\"#888\"/>";
  s +=
      "<text x=\"" + num(L - 3) + "\" y=\"" + num(T + 4) + "\" text-anchor=\"end\">" + std::to_string(peak) + "</text>";
  for (std::size_t k = 0; k < h.size(); ++k) {
    const double x = L + step * static_cast<double>(k);
    const double frac = top > 0 ? std::log10(static_cast<double>(h[k]) + 1) / top : 0;
    const double hgt = (base - T) * frac;
    s += "<rect x=\"" + num(x + step * 0.1) + "\" y=\"" + num(base - hgt) + "\" width=\"" + num(step * 0.8) +
         "\" height=\"" + num(hgt) + "\" fill=\"" + (k == 0 ? "#34a853" : "#4285f4") + "\"><title>ULP " +
         bucket_label(k) + ": " + std::to_string(h[k]) + " elements</title></rect>";
    s += "<text transform=\"translate(" + num(x + step / 2 + 3) + "," + num(base + 6) +
         ") rotate(60)\" font-size=\"8\">" + esc(bucket_tick(k)) + "</text>";
  }
  return s + "</svg>";
}

}  // namespace

std::string html_report(const DiffReport& r) {
  std::string h;
  h.reserve(1 << 16);
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
       "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
       "<title>tseal diff: " +
       esc(r.file_a) + " vs " + esc(r.file_b) + "</title><style>" + kStyle + "</style></head><body>\n";
  h += "<h1>tseal diff</h1><div class=\"files\">A: " + esc(r.file_a) + "<br>B: " + esc(r.file_b) + "</div>\n";
  const bool eq = r.equal();
  const std::string verdict = r.verdict();
  h += "<div id=\"summary\" class=\"" + std::string(eq ? "equal" : "differ") + "\"><b>" + esc(verdict) +
       "</b><div class=\"cards\">";
  std::size_t counts[6] = {};
  for (const auto& t : r.tensors) ++counts[static_cast<int>(t.status)];
  const char* labels[6] = {"identical", "numerically equal", "within tolerance",
                           "different", "shape changed",     "incomparable"};
  for (int i = 0; i < 6; ++i)
    if (counts[i] || i == 0)
      h += "<span class=\"card\">" + std::string(labels[i]) + ": " + std::to_string(counts[i]) + "</span>";
  h += "<span class=\"card\">only in A: " + std::to_string(r.only_in_a.size()) + "</span>";
  h += "<span class=\"card\">only in B: " + std::to_string(r.only_in_b.size()) + "</span>";
  h += "<span class=\"card\">renamed: " + std::to_string(r.renamed.size()) + "</span>";
  h += "<span class=\"card\">tolerance: atol " + num(r.atol) + ", rtol " + num(r.rtol) + ", ulp " +
       std::to_string(r.ulp) + "</span>";
  h += "</div></div>\n";

  h += "<h2>Max absolute error per tensor</h2>" + error_plot(r) +
       "<div class=\"note\">Bars: max |a-b| (log scale; red outside tolerance, orange within). "
       "Dots on the baseline: no numeric error (green: bit-identical).</div>\n";

  // Worst tensors by ULP distance, then by absolute error.
  std::vector<const TensorDiff*> worst;
  for (const auto& t : r.tensors)
    if (!t.ulp_histogram.empty() && t.value_different > 0) worst.push_back(&t);
  std::stable_sort(worst.begin(), worst.end(), [](const TensorDiff* x, const TensorDiff* y) {
    if (x->max_ulp != y->max_ulp) return x->max_ulp > y->max_ulp;
    return x->max_abs > y->max_abs;
  });
  if (worst.size() > 6) worst.resize(6);
  h += "<h2>ULP error histograms (worst tensors)</h2><div id=\"ulp-histograms\" class=\"hists\">";
  for (const auto* t : worst) h += histogram_svg(*t);
  if (worst.empty()) {
    bool numeric_differences = false;
    for (const auto& t : r.tensors) numeric_differences = numeric_differences || t.value_different > 0;
    h += numeric_differences ? "<div class=\"note\">No histograms collected (DiffOptions::histogram).</div>"
                             : "<div class=\"note\">No tensor has numeric differences.</div>";
  }
  h += "</div><div class=\"note\">Buckets by ULP distance: 0, 1, 2-3, 4-7, ...; each labelled with its lower bound "
       "(log-scaled counts; hover a bar for its range and count).</div>\n";

  h += "<h2>Tensors</h2><table id=\"tensor-table\"><thead><tr><th>#</th><th>path</th><th>status</th><th>dtype</th>"
       "<th>shape</th><th data-num>differing</th><th data-num>max abs</th><th data-num>max rel</th>"
       "<th data-num>max ULP</th><th>first difference</th></tr></thead><tbody>\n";
  for (std::size_t i = 0; i < r.tensors.size(); ++i) {
    const auto& t = r.tensors[i];
    const std::string st(status_name(t.status));
    std::string dtype(name(t.dtype_a));
    if (t.dtype_changed()) dtype = t.conversion();
    std::string shape = shape_text(t.shape_a);
    if (t.shape_a != t.shape_b) shape += " \xe2\x86\x92 " + shape_text(t.shape_b);
    std::string first;
    if (t.first) {
      first = shape_text(t.first->index) + ": " + t.first->a + " vs " + t.first->b;
    }
    h += "<tr class=\"row " + st + "\"><td class=\"num\" data-v=\"" + std::to_string(i) + "\">" + std::to_string(i) +
         "</td><td class=\"path\" data-v=\"" + esc(t.path) + "\">" + esc(t.path) + "</td><td class=\"st\" data-v=\"" +
         st + "\">" + st + "</td><td data-v=\"" + esc(dtype) + "\">" + esc(dtype) + "</td><td data-v=\"" + esc(shape) +
         "\">" + esc(shape) + "</td><td class=\"num\" data-v=\"" + std::to_string(t.value_different) + "\">" +
         std::to_string(t.value_different) + " / " + std::to_string(t.numel) + "</td><td class=\"num\" data-v=\"" +
         key(t.max_abs) + "\">" + num(t.max_abs) + "</td><td class=\"num\" data-v=\"" + key(t.max_rel) + "\">" +
         num(t.max_rel) + "</td><td class=\"num\" data-v=\"" + key(t.max_ulp) + "\">" + num(t.max_ulp, 6) +
         "</td><td data-v=\"" + esc(first) + "\">" + esc(first) + "</td></tr>\n";
  }
  h += "</tbody></table>\n";

  h += "<h2>Tensors on one side only</h2><table id=\"one-sided\"><thead><tr><th>side</th><th>path</th><th>dtype</th>"
       "<th>shape</th></tr></thead><tbody>";
  for (const auto& t : r.only_in_a)
    h += "<tr><td>only in A</td><td class=\"path\">" + esc(t.path) + "</td><td>" + std::string(name(t.dtype)) +
         "</td><td>" + shape_text(t.shape) + "</td></tr>";
  for (const auto& t : r.only_in_b)
    h += "<tr><td>only in B</td><td class=\"path\">" + esc(t.path) + "</td><td>" + std::string(name(t.dtype)) +
         "</td><td>" + shape_text(t.shape) + "</td></tr>";
  for (const auto& t : r.renamed)
    h += "<tr><td>renamed</td><td class=\"path\">" + esc(t.path_a) + " \xe2\x86\x92 " + esc(t.path_b) + "</td><td>" +
         std::string(name(t.dtype)) + "</td><td>" + shape_text(t.shape) + "</td></tr>";
  if (r.only_in_a.empty() && r.only_in_b.empty() && r.renamed.empty())
    h += "<tr><td colspan=\"4\" class=\"note\">none: both files hold the same tensor paths</td></tr>";
  h += "</tbody></table>\n";

  h += "<h2>Other values</h2><table id=\"values\"><thead><tr><th>path</th><th>A</th><th>B</th></tr></thead><tbody>";
  for (const auto& v : r.values)
    h += "<tr><td class=\"path\">" + esc(v.path) + "</td><td>" + esc(v.a.value_or("(absent)")) + "</td><td>" +
         esc(v.b.value_or("(absent)")) + "</td></tr>";
  if (r.values.empty()) h += "<tr><td colspan=\"3\" class=\"note\">none: every non-tensor value is equal</td></tr>";
  h += "</tbody></table>\n<script>" + std::string(kScript) + "</script>\n</body></html>\n";
  return h;
}

void write_html_report(const DiffReport& report, const std::filesystem::path& path) {
  const std::string html = html_report(report);
  detail::io::AtomicFileSink sink(path);
  sink.write(std::span<const std::byte>(reinterpret_cast<const std::byte*>(html.data()), html.size()));
  sink.commit();
}

}  // namespace tensorseal
