#include "zip/describe.h"

#include <fmt/format.h>

#include <cstdio>
#include <set>
#include <string>

#include "zip/constants.h"

namespace tensorseal::detail::zip {
namespace {

using core::fact;

std::string system_name(unsigned s) {
  switch (s) {
    case 0:
      return "0 (msdos)";
    case 3:
      return "3 (unix)";
    case 10:
      return "10 (ntfs)";
    case 19:
      return "19 (osx)";
    default:
      return std::to_string(s);
  }
}

std::string dos_datetime(std::uint16_t date, std::uint16_t time) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04u-%02u-%02u %02u:%02u:%02u", 1980u + (date >> 9), (date >> 5) & 15u, date & 31u,
                time >> 11, (time >> 5) & 63u, (time & 31u) * 2);
  return buf;
}

std::string method_name(std::uint16_t method) {
  if (method == zip::kMethodStored) return "stored";
  if (method == zip::kMethodDeflated) return "deflated";
  return std::to_string(method);
}

std::string joined(const std::set<std::string>& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : ", ") + v;
  return out.empty() ? std::string("none") : out;
}

}  // namespace

std::vector<Fact> describe(const Archive& ar, std::string_view prefix) {
  std::vector<Fact> facts;
  if (!prefix.empty()) {
    std::string_view folder = prefix;
    if (folder.back() == '/') folder.remove_suffix(1);
    facts.push_back(fact(topics::kPrefix, "archive folder", std::string(folder)));
  }
  std::string order;
  bool descriptors = true, extras = false;
  std::set<std::string> stamps, systems, methods;
  for (const auto& e : ar.entries) {
    const std::string_view name = std::string_view(e.name).starts_with(prefix)
                                      ? std::string_view(e.name).substr(prefix.size())
                                      : std::string_view(e.name);
    if (!order.empty()) order += ',';
    order += name;
    stamps.insert(dos_datetime(e.dos_date, e.dos_time));
    descriptors &= e.has_data_descriptor;
    systems.insert(system_name(e.version_made_by >> 8));
    extras |= !e.central_extra.empty();
    methods.insert(method_name(e.method));
  }
  facts.push_back(fact(topics::kRecords, "record order", order));
  facts.push_back(fact(topics::kTimestamps, "entries", joined(stamps)));
  facts.push_back(fact(topics::kDataDescriptors, "entries", descriptors ? "all" : "not all"));
  facts.push_back(fact(topics::kCreateSystem, "entries", joined(systems)));
  facts.push_back(fact(topics::kExtraFields, "central directory", extras ? "central extra fields present" : "none"));
  facts.push_back(fact(topics::kCompression, "entries", joined(methods)));
  facts.push_back(fact(topics::kZip64, "end records", ar.zip64 ? "present" : "absent"));
  if (ar.prefix_size != 0 || ar.unaccounted_bytes != 0)
    facts.push_back(
        fact(topics::kUnaccountedBytes, "byte 0", fmt::format("{} (prefix {})", ar.unaccounted_bytes, ar.prefix_size)));
  return facts;
}

}  // namespace tensorseal::detail::zip
