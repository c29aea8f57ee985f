#include <algorithm>

#include "common.h"

namespace tseal {

void print_table(const std::vector<std::vector<std::string>>& rows, std::FILE* out) {
  std::vector<std::size_t> width;
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line.append(width[i] - r[i].size() + 2, ' ');
    }
    std::fprintf(out, "%s\n", line.c_str());
  }
}

void print_table(std::size_t n, const std::function<std::vector<std::string>(std::size_t)>& row, std::FILE* out) {
  std::vector<std::size_t> width;
  for (std::size_t k = 0; k < n; ++k) {
    const auto r = row(k);
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  }
  for (std::size_t k = 0; k < n; ++k) {
    const auto r = row(k);
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line.append(width[i] - r[i].size() + 2, ' ');
    }
    std::fprintf(out, "%s\n", line.c_str());
  }
}

}  // namespace tseal
