// The client shm registry (supervisor/triton/client_shm.cc) over real POSIX shm
// objects: register / unregister / status, every refused registration leaves
// the registry as it was, a held region outlives unregister and shm_unlink, and
// a truncated object is an error in this very process (a SIGBUS would kill it).
#include "supervisor/triton/client_shm.h"

#include <grp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/client_shm_object.h"
#include "tests/support/fd_count.h"

namespace corepool::triton {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using testing::ClientShmObject;

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
constexpr uid_t kOtherUid = 65534;  // nobody

std::unique_ptr<ClientShmRegistry> make_registry(bool allowed = true, std::string group = "") {
  auto made = ClientShmRegistry::create({allowed, std::move(group)});
  if (!made.status.ok()) throw std::runtime_error(made.status.message);
  return std::move(made.value);
}

std::vector<unsigned char> pattern(size_t n) {
  std::vector<unsigned char> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<unsigned char>(i * 7 + 3);
  return out;
}

// The name of a group other than ours, to chown objects to; "" if none.
std::string other_group_name(gid_t gid) {
  std::array<char, 4096> buf{};
  group entry{};
  group* found = nullptr;
  if (::getgrgid_r(gid, &entry, buf.data(), buf.size(), &found) != 0 || !found) return "";
  return found->gr_name;
}

class ClientShmTest : public ::testing::Test {
 protected:
  void SetUp() override { fds_at_start_ = testing::open_fd_count(); }
  void TearDown() override {
    registry_.reset();  // the registry's fds go with it
    EXPECT_EQ(testing::open_fd_count(), fds_at_start_) << "a region's fd was not closed";
    EXPECT_THAT(testing::shm_residue(), ::testing::IsEmpty());
  }

  std::string status(const std::string& name = "") const {
    auto s = registry_->status_json(name);
    return s.status.ok() ? s.value : "error: " + s.status.message;
  }

  std::unique_ptr<ClientShmRegistry> registry_ = make_registry();
  int fds_at_start_ = 0;
};

TEST_F(ClientShmTest, ARegisteredRegionIsListedAndReadsTheClientsBytes) {
  ClientShmObject object(256);
  object.put(0, pattern(256).data(), 256);
  ASSERT_TRUE(registry_->register_region("in", object.key(), 16, 64).ok());

  EXPECT_EQ(json::parse(status()),
            json::parse(R"([{"name": "in", "key": ")" + object.key() + R"(", "offset": 16, "byte_size": 64}])"));
  EXPECT_EQ(status("in"), status());

  auto region = registry_->find("in");
  ASSERT_NE(region, nullptr);
  unsigned char got[8];
  ASSERT_TRUE(region->read(4, sizeof got, got).ok());  // region offset 4 = object byte 20
  const auto want = pattern(256);
  EXPECT_EQ(std::vector<unsigned char>(got, got + 8), std::vector<unsigned char>(want.begin() + 20, want.begin() + 28));
}

TEST_F(ClientShmTest, UnregisterForgetsOneRegionOrAll) {
  ClientShmObject a(64), b(64);
  ASSERT_TRUE(registry_->register_region("a", a.key(), 0, 64).ok());
  ASSERT_TRUE(registry_->register_region("b", b.key(), 0, 64).ok());
  ASSERT_TRUE(registry_->unregister("a").ok());
  EXPECT_EQ(registry_->find("a"), nullptr);
  EXPECT_EQ(json::parse(status()).size(), 1u);
  EXPECT_EQ(json::parse(status())[0]["name"], "b");

  ASSERT_TRUE(registry_->register_region("a", a.key(), 0, 64).ok());  // the name is free again
  ASSERT_TRUE(registry_->unregister("").ok());
  EXPECT_EQ(status(), "[]");
}

TEST_F(ClientShmTest, UnknownNamesAreNotFoundInStatusAndIgnoredByUnregisterAsInTriton) {
  EXPECT_EQ(registry_->status_json("nope").status.code, Code::kNotFound);
  EXPECT_THAT(registry_->status_json("nope").status.message, HasSubstr("\"nope\""));
  EXPECT_TRUE(registry_->unregister("nope").ok());
}

TEST_F(ClientShmTest, AKeyWithoutItsLeadingSlashNamesTheSameObject) {
  ClientShmObject object(64);  // Python's multiprocessing.shared_memory names lack the slash
  EXPECT_TRUE(registry_->register_region("r", object.key().substr(1), 0, 64).ok()) << status();
}

TEST_F(ClientShmTest, AMissingKeyIsRefusedNamingTheKey) {
  const std::string key = "/" + testing::shm_test_prefix() + "never-created";
  const Status s = registry_->register_region("r", key, 0, 16);
  EXPECT_EQ(s.code, Code::kInvalidArgument);
  EXPECT_THAT(s.message, HasSubstr(key));
  EXPECT_THAT(s.message, HasSubstr("no such shared memory object"));
  EXPECT_EQ(status(), "[]");
}

TEST_F(ClientShmTest, MalformedKeysAreRefusedBeforeAnyOpen) {
  const std::vector<std::string> keys = {"",    "/",   "/a/b", "a/b", "/.", "/..", std::string("/a\0b", 4),
                                        "/" + std::string(256, 'k')};
  for (const std::string& key : keys) {
    const Status s = registry_->register_region("r", key, 0, 16);
    EXPECT_EQ(s.code, Code::kInvalidArgument) << key;
    EXPECT_THAT(s.message, HasSubstr("not a shared memory key")) << key;
  }
  EXPECT_EQ(registry_->register_region("", "/x", 0, 16).code, Code::kInvalidArgument);
  EXPECT_EQ(status(), "[]");
}

TEST_F(ClientShmTest, AnOffsetOrSizePastTheObjectsEndIsRefused) {
  ClientShmObject object(64);
  const std::pair<uint64_t, uint64_t> bad[] = {{0, 65}, {1, 64}, {64, 1}, {65, 1}, {kMax, 1}, {1, kMax}, {kMax, kMax}};
  for (auto [offset, size] : bad) {
    const Status s = registry_->register_region("r", object.key(), offset, size);
    EXPECT_EQ(s.code, Code::kInvalidArgument) << offset << " + " << size;
    EXPECT_THAT(s.message, HasSubstr("past the end of \"" + object.key() + "\" (64 bytes)"));
  }
  EXPECT_EQ(registry_->register_region("r", object.key(), 0, 0).code, Code::kInvalidArgument);
  EXPECT_EQ(status(), "[]");
  EXPECT_TRUE(registry_->register_region("r", object.key(), 60, 4).ok());  // exactly to the end
}

TEST_F(ClientShmTest, AnObjectOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give an object to uid " << kOtherUid;
  ClientShmObject object(64);
  ASSERT_EQ(::fchown(object.fd(), kOtherUid, kOtherUid), 0);
  const Status s = registry_->register_region("r", object.key(), 0, 64);
  EXPECT_EQ(s.code, Code::kPermissionDenied);
  EXPECT_THAT(s.message, HasSubstr("owned by uid 65534"));
  EXPECT_EQ(status(), "[]");
}

TEST_F(ClientShmTest, AnObjectOfTheAllowedGroupIsAccepted) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give an object to uid " << kOtherUid;
  const gid_t gid = 65534;
  const std::string group = other_group_name(gid);
  if (group.empty()) GTEST_SKIP() << "no group with gid " << gid << " on this system";
  ClientShmObject object(64);
  ASSERT_EQ(::fchown(object.fd(), kOtherUid, gid), 0);
  registry_ = make_registry(true, group);
  EXPECT_TRUE(registry_->register_region("r", object.key(), 0, 64).ok()) << status();
  auto without_group = make_registry(true, "");  // the group is what let it in
  EXPECT_EQ(without_group->register_region("r", object.key(), 0, 64).code, Code::kPermissionDenied);
}

TEST_F(ClientShmTest, AnUnknownGroupIsAClearErrorAtCreation) {
  auto made = ClientShmRegistry::create({true, "corepool-no-such-group"});
  EXPECT_EQ(made.status.code, Code::kInvalidArgument);
  EXPECT_THAT(made.status.message, HasSubstr("serve.client_shm_group \"corepool-no-such-group\": no such group"));
  EXPECT_TRUE(ClientShmRegistry::create({false, "corepool-no-such-group"}).status.ok());  // unused when disabled
}

TEST_F(ClientShmTest, ADuplicateNameIsAlreadyExistsAndKeepsTheFirst) {
  ClientShmObject first(64), second(64);
  ASSERT_TRUE(registry_->register_region("r", first.key(), 0, 64).ok());
  const Status s = registry_->register_region("r", second.key(), 0, 32);
  EXPECT_EQ(s.code, Code::kAlreadyExists);
  EXPECT_THAT(s.message, HasSubstr("\"r\" is already registered"));
  EXPECT_EQ(json::parse(status())[0]["key"], first.key());
  EXPECT_EQ(json::parse(status())[0]["byte_size"], 64);
}

TEST_F(ClientShmTest, ConcurrentRegistrationsOfOneNameAcceptExactlyOne) {
  std::vector<std::unique_ptr<ClientShmObject>> objects;
  for (int i = 0; i < 8; ++i) objects.push_back(std::make_unique<ClientShmObject>(64));
  std::atomic<int> ok{0}, exists{0}, other{0};
  std::vector<std::thread> threads;
  for (auto& object : objects) {
    threads.emplace_back([&, key = object->key()] {
      const Status s = registry_->register_region("r", key, 0, 64);
      ++(s.ok() ? ok : s.code == Code::kAlreadyExists ? exists : other);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, 1);
  EXPECT_EQ(exists, 7);
  EXPECT_EQ(other, 0);
}

TEST_F(ClientShmTest, AHeldRegionStillReadsAfterUnregisterAndShmUnlink) {
  ClientShmObject object(64);
  object.put(0, pattern(64).data(), 64);
  ASSERT_TRUE(registry_->register_region("r", object.key(), 0, 64).ok());
  std::shared_ptr<const ClientShmRegion> held = registry_->find("r");  // a request in flight
  ASSERT_TRUE(registry_->unregister("r").ok());
  object.unlink();
  EXPECT_EQ(registry_->find("r"), nullptr);
  std::vector<unsigned char> got(64);
  ASSERT_TRUE(held->read(0, 64, got.data()).ok());
  EXPECT_EQ(got, pattern(64));
  const unsigned char one = 0x5a;
  EXPECT_TRUE(held->write(63, 1, &one).ok());
  EXPECT_EQ(object.get(63, 1)[0], 0x5a);
}

TEST_F(ClientShmTest, ATruncatedObjectIsAClearErrorNotASigbus) {
  ClientShmObject object(4096);
  ASSERT_TRUE(registry_->register_region("r", object.key(), 1024, 2048).ok());
  auto region = registry_->find("r");
  std::vector<unsigned char> buf(2048);

  ASSERT_EQ(::ftruncate(object.fd(), 2048), 0);  // half the region is gone
  Status s = region->read(0, 2048, buf.data());
  EXPECT_EQ(s.code, Code::kInvalidArgument);
  EXPECT_THAT(s.message, HasSubstr("region \"r\" was truncated: the read needs bytes 1024..3072 of \"" +
                                   object.key() + "\", which now holds 2048 bytes"));
  EXPECT_TRUE(region->read(0, 1024, buf.data()).ok());  // what is left still reads

  ASSERT_EQ(::ftruncate(object.fd(), 0), 0);
  EXPECT_THAT(region->read(0, 4, buf.data()).message, HasSubstr("was truncated"));
  s = region->write(0, 4, buf.data());
  EXPECT_EQ(s.code, Code::kInvalidArgument);
  EXPECT_THAT(s.message, HasSubstr("was truncated: the write needs bytes 1024..1028"));
  struct stat st {};
  ASSERT_EQ(::fstat(object.fd(), &st), 0);
  EXPECT_EQ(st.st_size, 0) << "the refused write grew the client's object";
}

TEST_F(ClientShmTest, WritesLandAtTheRegionsOffsetAndNowhereElse) {
  ClientShmObject object(64);
  const std::vector<unsigned char> zeros(64, 0);
  object.put(0, zeros.data(), 64);
  ASSERT_TRUE(registry_->register_region("r", object.key(), 8, 16).ok());
  const unsigned char data[4] = {1, 2, 3, 4};
  ASSERT_TRUE(registry_->find("r")->write(12, 4, data).ok());  // the region's last 4 bytes
  std::vector<unsigned char> want(64, 0);
  std::memcpy(want.data() + 20, data, 4);
  EXPECT_EQ(object.get(0, 64), want);
}

TEST_F(ClientShmTest, ReadsAndWritesOutsideTheRegionAreRefused) {
  ClientShmObject object(64);
  ASSERT_TRUE(registry_->register_region("r", object.key(), 8, 16).ok());
  auto region = registry_->find("r");
  unsigned char buf[32] = {};
  const std::pair<uint64_t, uint64_t> bad[] = {{0, 17}, {16, 1}, {17, 0}, {kMax, 1}, {1, kMax}};
  for (auto [offset, bytes] : bad) {
    const Status s = region->read(offset, bytes, buf);
    EXPECT_EQ(s.code, Code::kInvalidArgument) << offset << " + " << bytes;
    EXPECT_THAT(s.message, HasSubstr("is past its end (16 bytes)"));
    EXPECT_EQ(region->write(offset, bytes, buf).code, Code::kInvalidArgument);
  }
}

TEST_F(ClientShmTest, AFifoUnderDevShmIsRefusedWithoutBlocking) {
  const std::string name = testing::shm_test_prefix() + "fifo";
  ASSERT_EQ(::mkfifo(("/dev/shm/" + name).c_str(), 0600), 0);
  const Status s = registry_->register_region("r", "/" + name, 0, 1);
  ::unlink(("/dev/shm/" + name).c_str());
  EXPECT_EQ(s.code, Code::kInvalidArgument);
  EXPECT_THAT(s.message, HasSubstr("not a shared memory object"));
}

TEST_F(ClientShmTest, DisabledRefusesEveryCall) {
  registry_ = make_registry(false);
  ClientShmObject object(64);
  for (const Status& s : {registry_->register_region("r", object.key(), 0, 64), registry_->unregister(""),
                          registry_->status_json("").status}) {
    EXPECT_EQ(s.code, Code::kPermissionDenied);
    EXPECT_THAT(s.message, HasSubstr("serve.allow_client_shm = false"));
  }
  EXPECT_EQ(registry_->find("r"), nullptr);
}

}  // namespace
}  // namespace corepool::triton
