// Doors (supervisor/triton/doors.cc): the Bearer check both wires use, the
// constant-time comparison, and where the token comes from (api_token or a
// file that only the service may read).
#include "supervisor/triton/doors.h"

#include <sys/stat.h>

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/config_error.h"
#include "tests/support/temp_dir.h"

namespace corepool::triton {
namespace {

using ::testing::HasSubstr;

TEST(DoorsTest, TheRightBearerTokenPassesAndAnythingElseIs401AndCounted) {
  Doors doors("s3cret-token", /*allow_model_control=*/false);
  EXPECT_TRUE(doors.check(std::string_view("Bearer s3cret-token")).ok());
  EXPECT_TRUE(doors.check(std::string_view("bearer   s3cret-token ")).ok());  // RFC 7235: scheme in any case
  EXPECT_EQ(doors.refused_unauthenticated(), 0u);
  for (const char* wrong : {"Bearer s3cret-toke", "Bearer s3cret-token2", "Bearer ", "s3cret-token",
                            "Basic czNjcmV0LXRva2Vu", "", "Bearer S3CRET-TOKEN"}) {
    const Status s = doors.check(std::string_view(wrong));
    EXPECT_EQ(s.code, Code::kUnauthenticated) << wrong;
    EXPECT_THAT(s.message, HasSubstr("wrong token")) << wrong;
  }
  const Status missing = doors.check(std::nullopt);
  EXPECT_EQ(missing.code, Code::kUnauthenticated);
  EXPECT_THAT(missing.message, HasSubstr("missing token"));
  EXPECT_EQ(doors.refused_unauthenticated(), 8u);
  EXPECT_EQ(doors.refused_forbidden(), 0u);
}

TEST(DoorsTest, WithoutATokenModelControlIsForbiddenUnlessAllowed) {
  Doors closed("", false);
  const Status s = closed.check(std::string_view("Bearer anything"));
  EXPECT_EQ(s.code, Code::kPermissionDenied);
  EXPECT_THAT(s.message, HasSubstr("serve.allow_model_control"));
  EXPECT_EQ(closed.refused_forbidden(), 1u);
  Doors open("", true);
  EXPECT_TRUE(open.check(std::nullopt).ok());
  EXPECT_EQ(open.refused_forbidden(), 0u);
}

TEST(DoorsTest, ConstantTimeEqualComparesLengthAndEveryByte) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "bbc"));
  EXPECT_FALSE(constant_time_equal("abc", "abcd"));
  EXPECT_FALSE(constant_time_equal(std::string_view("a\0c", 3), std::string_view("a\0d", 3)));
}

class TokenFileTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text, mode_t mode) {
    const std::string path = dir_.path() + "/token";
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }
  testing::TempDir dir_;
};

TEST_F(TokenFileTest, TheFirstLineOfAPrivateFileIsTheToken) {
  Config config;
  config.api_token_file = write("abc123\nignored\n", 0600);
  EXPECT_EQ(resolve_api_token(config), "abc123");
  config.api_token_file = write("abc123\r\n", 0640);  // the group may read it; others may not
  EXPECT_EQ(resolve_api_token(config), "abc123");
}

TEST_F(TokenFileTest, AFileOthersMayReadIsRefusedNamingItAndTheFix) {
  Config config;
  config.api_token_file = write("abc123\n", 0644);
  try {
    resolve_api_token(config);
    ADD_FAILURE() << "a world-readable token file was accepted";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("serve.api_token_file: " + config.api_token_file));
    EXPECT_THAT(e.what(), HasSubstr("readable by every user (mode 644)"));
    EXPECT_THAT(e.what(), HasSubstr("chmod 600"));
  }
}

TEST_F(TokenFileTest, MissingEmptyOrDoubleTokensAreConfigErrors) {
  Config config;
  config.api_token_file = dir_.path() + "/nope";
  EXPECT_THROW(resolve_api_token(config), ConfigError);
  config.api_token_file = write("\n", 0600);
  EXPECT_THROW(resolve_api_token(config), ConfigError);
  config.api_token_file = write("abc\n", 0600);
  config.api_token = "def";
  EXPECT_THROW(resolve_api_token(config), ConfigError);
  config.api_token_file.clear();
  EXPECT_EQ(resolve_api_token(config), "def");
  EXPECT_EQ(resolve_api_token(Config{}), "");
}

}  // namespace
}  // namespace corepool::triton
