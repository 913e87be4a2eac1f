// keel's JSON output: escapes, order, numbers, and names that are not UTF-8.
#include "host/json.h"

#include <gtest/gtest.h>

#include <cmath>

namespace keel {
namespace {

TEST(Json, NestsInTheOrderWrittenAndEscapes) {
  Json j = {{"name", "a\"b\\c\n"}, {"list", {1, -2, true, nullptr}}, {"x", 0.5}, {"o", Json::object()}};
  EXPECT_EQ(json_text(j), R"({"name":"a\"b\\c\n","list":[1,-2,true,null],"x":0.5,"o":{}})");
}

TEST(Json, ControlCharactersAndNonFinite) {
  Json j = {std::string("\x01", 1), 1.0 / 0.0, std::nan("")};
  EXPECT_EQ(json_text(j), R"(["\u0001",null,null])");
}

// A cgroup named with bytes that are not UTF-8 (any tenant can make one): escaped as text, never raw,
// so the output stays valid JSON and reads back.
TEST(Json, InvalidUtf8IsEscapedNeverEmittedRaw) {
  const std::string bad = "/docker/\xff\xfe-x\xc3(\xe2\x82\x28\xed\xa0\x80\xf4\x90\x80\x80\xc0\xaf";
  Json j = {{"cgroup", bad}, {bad, 1}};
  std::string text = json_text(j);
  for (char c : text) EXPECT_LT(static_cast<unsigned char>(c), 0x80) << text;  // nothing but ASCII was added
  auto back = Json::parse(text);                                               // valid JSON
  EXPECT_EQ(back["cgroup"],
            "/docker/\\xff\\xfe-x\\xc3(\\xe2\\x82(\\xed\\xa0\\x80\\xf4\\x90\\x80\\x80\\xc0\\xaf");
  // Valid UTF-8 passes through as it is.
  EXPECT_EQ(utf8_safe("kubepods/pod-\xc3\xa9t\xc3\xa9-\xf0\x9f\x99\x82"),
            "kubepods/pod-\xc3\xa9t\xc3\xa9-\xf0\x9f\x99\x82");
  EXPECT_EQ(json_text(Json("\xc3\xa9")), "\"\xc3\xa9\"");
}

TEST(Json, NumbersRoundTripExactly) {
  for (double v : {0.1 + 0.2, 1e-300, 123456.789012345678, 2.0 / 3.0}) {
    auto back = Json::parse(json_text(Json(v)));
    EXPECT_EQ(back.get<double>(), v);
  }
}

}  // namespace
}  // namespace keel
