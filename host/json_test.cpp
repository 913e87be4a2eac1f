#include "host/json.h"

#include <gtest/gtest.h>

namespace keel {
namespace {

TEST(JsonWriter, NestsWithCommasAndEscapes) {
  JsonWriter j;
  j.begin_object()
      .field("name", "a\"b\\c\n")
      .key("list")
      .begin_array()
      .value(1)
      .value(-2)
      .value(true)
      .null()
      .end_array()
      .field("x", 0.5)
      .key("o")
      .begin_object()
      .end_object()
      .end_object();
  EXPECT_EQ(j.str(), R"({"name":"a\"b\\c\n","list":[1,-2,true,null],"x":0.5,"o":{}})");
}

TEST(JsonWriter, ControlCharactersAndNonFinite) {
  JsonWriter j;
  j.begin_array().value(std::string_view("\x01", 1)).value(1.0 / 0.0).end_array();
  EXPECT_EQ(j.str(), R"(["\u0001",null])");
}

}  // namespace
}  // namespace keel
