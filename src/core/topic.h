// Fact topics: every topic a reader may emit is declared once, as a Topic constant in
// its format's constants.h (namespace topics, beside the rules), with the sentence
// `explain` gives when two files differ in it. Readers build facts only from Topics,
// and each constants.h lists its topics in kAll, which is explain's table.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "tensorseal/checkpoint.h"

namespace tensorseal::detail::core {

struct Topic {
  std::string_view id;        // stable, lower-case, dotted: "zip.prefix"
  std::string_view sentence;  // what a difference in it means for the bytes
};

// A fact about `topic` at `where`.
inline Fact fact(const Topic& topic, std::string where, std::string value) {
  return Fact{std::string(topic.id), std::move(where), std::move(value)};
}

}  // namespace tensorseal::detail::core
