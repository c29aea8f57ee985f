// The facts `explain` compares for a zip archive, the same for every format built on
// zip (torch zip checkpoints, numpy .npz). Topics: zip/constants.h, zip::topics.
#pragma once

#include <string_view>
#include <vector>

#include "tensorseal/checkpoint.h"
#include "zip/reader.h"

namespace tensorseal::detail::zip {

// In this order, with `where` as given:
//   zip.prefix             "archive folder"     the prefix without its '/' (only when
//                                                `prefix` is not empty)
//   zip.records            "record order"       entry names, `prefix` removed, joined by ','
//   zip.timestamps         "entries"            distinct "YYYY-MM-DD HH:MM:SS", sorted, ", "
//   zip.data_descriptors   "entries"            "all" | "not all"
//   zip.create_system      "entries"            distinct "3 (unix)", "0 (msdos)", ..., sorted, ", "
//   zip.extra_fields       "central directory"  "none" | "central extra fields present"
//   zip.compression        "entries"            distinct "stored" | "deflated" | method number
//   zip.zip64              "end records"        "present" | "absent"
//   zip.unaccounted_bytes  "byte 0"             "N (prefix P)", only when N or P is not 0
// Distinct-value lists are "none" for an archive without entries. `prefix` is the
// folder every entry name starts with ("" for none).
std::vector<Fact> describe(const Archive& archive, std::string_view prefix);

}  // namespace tensorseal::detail::zip
