// /proc/PID/stat's fields, counted after the command's last ')'.
#include "host/proc_stat.h"

#include <gtest/gtest.h>

namespace keel {
namespace {

TEST(ProcStat, FieldsCountFromTheCommandsLastParenthesis) {
  auto s = parse_proc_stat("42 (a (b) c) R 1 42 42 0 -1 2097216 5 0 0 0 7 3 0 0 20 0 1 0 123456 100 5\n");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->comm, "a (b) c");
  EXPECT_EQ(s->field(3), "R");
  EXPECT_EQ(s->number(9), 2097216u);  // flags
  EXPECT_EQ(s->number(14), 7u);       // utime
  EXPECT_EQ(s->number(22), 123456u);  // starttime
  EXPECT_FALSE(s->number(8)) << "-1 (tpgid) is no unsigned number";
  EXPECT_FALSE(s->field(2));
  EXPECT_FALSE(s->field(25));
  EXPECT_FALSE(parse_proc_stat("42 no parentheses R 1"));
  EXPECT_FALSE(parse_proc_stat("42 )( R"));
}

}  // namespace
}  // namespace keel
