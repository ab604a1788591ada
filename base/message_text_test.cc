#include "base/message_text.h"

#include <gtest/gtest.h>

namespace rill {
namespace {

TEST(ShortForMessageTest, KeepsShortTextAndCutsLongTextOnACharacterBoundary) {
  EXPECT_EQ(ShortForMessage("abc"), "abc");
  EXPECT_EQ(ShortForMessage(std::string(64, 'a')), std::string(64, 'a'));
  EXPECT_EQ(ShortForMessage(std::string(10240, 'a')), std::string(64, 'a') + "...(10240 bytes)");
  // "é" is two bytes: a cut inside it backs up to its start.
  std::string s = std::string(3, 'x') + "\xc3\xa9" + "yyyy";
  EXPECT_EQ(ShortForMessage(s, 4), "xxx...(9 bytes)");
  EXPECT_EQ(ShortForMessage(s, 5), "xxx\xc3\xa9...(9 bytes)");
}

}  // namespace
}  // namespace rill
