#include "cli/args.h"

#include <gtest/gtest.h>

namespace keel::cli {
namespace {

const FlagSpec kSpec{.switches = {"json", "once"}, .with_value = {"config", "synthetic"}};

TEST(Args, PositionalsSwitchesAndValues) {
  auto a =
      parse_args({"FILE", "--json", "--config", "k.toml", "--synthetic=pack:1 pu:2", "--", "--x"}, kSpec);
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_EQ(a->positional, (std::vector<std::string>{"FILE", "--x"}));
  EXPECT_TRUE(a->has("json"));
  EXPECT_FALSE(a->has("once"));
  EXPECT_EQ(a->value("config"), "k.toml");
  EXPECT_EQ(a->value("synthetic"), "pack:1 pu:2");
  EXPECT_EQ(a->value("missing"), std::nullopt);
}

TEST(Args, TyposAndMissingValuesAreErrors) {
  EXPECT_EQ(parse_args({"--jsn"}, kSpec).error().what, "unknown option --jsn");
  EXPECT_EQ(parse_args({"--config"}, kSpec).error().what, "option --config needs a value");
  EXPECT_EQ(parse_args({"--json=1"}, kSpec).error().what, "option --json takes no value");
}

}  // namespace
}  // namespace keel::cli
