// Unit tests for serve's [[source]] tables (config/source_config.h) read
// through load_config(): what loads, and that every mistake names the file,
// the line, the table's index, the source and the key. Each test owns a temp dir.
#include "config/config.h"
#include "tests/support/temp_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace corepool {
namespace {

using ::testing::HasSubstr;

class SourceConfigTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    const std::string path = temp_ / "corepool.toml";
    std::ofstream(path) << text;
    return path;
  }
  std::string error_for(const std::string& text) {
    try {
      load_config(write(text));
    } catch (const ConfigError& error) {
      return error.what();
    }
    return "";
  }

  testing::TempDir temp_{"corepool-sources"};
};

constexpr const char* kTwo = R"([serve]
listen = "127.0.0.1:0"

[[source]]
name = "radio-1"
url = "http://127.0.0.1:8000/stream.mp3"
events = "jsonl:/var/lib/corepool/events/radio-1.jsonl"
backoff_s = 0.25

[[source]]
name = "mic_0"
url = "/srv/audio/mic.wav"
model = "tagger"
events = ["jsonl:a.jsonl", "jsonl:b/c.jsonl"]
)";

TEST_F(SourceConfigTest, TwoSourceTablesLoadInOrderWithTheirKeys) {
  const Config c = load_config(write(kTwo));
  ASSERT_EQ(c.sources.size(), 2u);
  EXPECT_EQ(c.sources[0].name, "radio-1");
  EXPECT_EQ(c.sources[0].url, "http://127.0.0.1:8000/stream.mp3");
  EXPECT_EQ(c.sources[0].model, "");
  ASSERT_EQ(c.sources[0].events.size(), 1u);
  EXPECT_EQ(c.sources[0].events[0].target, "/var/lib/corepool/events/radio-1.jsonl");
  EXPECT_DOUBLE_EQ(c.sources[0].backoff_s, 0.25);
  EXPECT_DOUBLE_EQ(c.sources[0].backoff_max_s, 60);
  EXPECT_FALSE(c.sources[0].is_file());
  EXPECT_EQ(c.sources[0].line, 4);
  EXPECT_EQ(c.sources[1].model, "tagger");
  ASSERT_EQ(c.sources[1].events.size(), 2u);
  EXPECT_EQ(c.sources[1].events[1].target, "b/c.jsonl");
  EXPECT_TRUE(c.sources[1].is_file());
  EXPECT_FALSE(c.sources[0].same(c.sources[1]));
}

TEST_F(SourceConfigTest, NoSourceTablesMeansNoSources) {
  EXPECT_TRUE(load_config(write("[serve]\nlisten = \"127.0.0.1:0\"\n")).sources.empty());
}

TEST_F(SourceConfigTest, ADuplicateNameNamesBothLines) {
  const std::string e = error_for(R"([[source]]
name = "a"
url = "x.wav"
events = "jsonl:a.jsonl"
[[source]]
name = "a"
url = "y.wav"
events = "jsonl:b.jsonl"
)");
  EXPECT_THAT(e, HasSubstr("corepool.toml:6: source[1].name: source \"a\" is named twice (first at line 1)"));
}

TEST_F(SourceConfigTest, ABadNameIsRefusedWithThePattern) {
  const std::string e = error_for("[[source]]\nname = \"my radio\"\nurl = \"x.wav\"\nevents = \"jsonl:a.jsonl\"\n");
  EXPECT_THAT(e, HasSubstr("corepool.toml:2: source[0].name: \"my radio\" is not a source name: 1 to 64 of A-Z a-z 0-9 _ -"));
}

TEST_F(SourceConfigTest, AMissingUrlNamesTheSource) {
  const std::string e = error_for("[[source]]\nname = \"r\"\nevents = \"jsonl:a.jsonl\"\n");
  EXPECT_THAT(e, HasSubstr("corepool.toml:1: source[0].url: source \"r\": required key is missing"));
}

TEST_F(SourceConfigTest, ASinkThatIsNeitherJsonlNorWebhookIsRefused) {
  const std::string e = error_for("[[source]]\nname = \"r\"\nurl = \"x.wav\"\nevents = \"file:/tmp/x\"\n");
  EXPECT_THAT(e, HasSubstr("corepool.toml:4: source[0].events: source \"r\": \"file:/tmp/x\" is not a sink"));
  EXPECT_THAT(error_for("[[source]]\nname = \"r\"\nurl = \"x.wav\"\nevents = \"jsonl:\"\n"),
              HasSubstr("jsonl: needs a file path"));
  EXPECT_THAT(error_for("[[source]]\nname = \"r\"\nurl = \"x.wav\"\nevents = []\n"), HasSubstr("the list is empty"));
}

TEST_F(SourceConfigTest, PipeTakesADescriptorNumber) {
  EXPECT_EQ(load_config(write("[[source]]\nname = \"p\"\nurl = \"pipe:3\"\nevents = \"jsonl:a\"\n")).sources[0].url,
            "pipe:3");
  EXPECT_THAT(error_for("[[source]]\nname = \"p\"\nurl = \"pipe:x\"\nevents = \"jsonl:a\"\n"),
              HasSubstr("corepool.toml:3: source[0].url: source \"p\": \"pipe:x\": pipe: takes a descriptor number"));
}

TEST_F(SourceConfigTest, AlsaTakesADeviceWithItsRateAndChannels) {
  const Config c = load_config(write("[[source]]\nname = \"m\"\nurl = \"alsa:plughw:CARD=Mic,DEV=0?sample_rate=16000&channels=1\"\n"
                                     "events = \"jsonl:a\"\n"));
  EXPECT_TRUE(c.sources[0].is_alsa());
  EXPECT_FALSE(c.sources[0].is_file());
  const AlsaUrl mic = parse_alsa_url(c.sources[0].url);
  EXPECT_EQ(mic.device, "plughw:CARD=Mic,DEV=0");
  EXPECT_EQ(mic.sample_rate, 16000);
  EXPECT_EQ(mic.channels, 1);
  const AlsaUrl plain = parse_alsa_url("alsa:hw:1,0");
  EXPECT_EQ(plain.device, "hw:1,0");
  EXPECT_EQ(plain.sample_rate, 48000);  // FFmpeg's defaults
  EXPECT_EQ(plain.channels, 2);
  const auto error = [&](const std::string& url) {
    return error_for("[[source]]\nname = \"m\"\nurl = \"" + url + "\"\nevents = \"jsonl:a\"\n");
  };
  EXPECT_THAT(error("alsa:"), HasSubstr("corepool.toml:3: source[0].url: source \"m\": \"alsa:\": alsa: takes a capture "
                                        "device as arecord -D names it"));
  EXPECT_THAT(error("alsa://default"), HasSubstr("alsa: takes a capture device"));
  EXPECT_THAT(error("alsa:default?rate=8000"), HasSubstr("\"rate\": an alsa: device takes sample_rate and channels"));
  EXPECT_THAT(error("alsa:default?sample_rate=99"), HasSubstr("sample_rate must be a whole number in 1000..384000"));
  EXPECT_THAT(error("alsa:default?channels=0"), HasSubstr("channels must be a whole number in 1..32"));
  EXPECT_THAT(error("alsa:default?channels="), HasSubstr("channels must be a whole number in 1..32"));
}

TEST_F(SourceConfigTest, AWebhookSinkIsAnHttpUrl) {
  const Config c = load_config(
      write("[[source]]\nname = \"r\"\nurl = \"x.wav\"\nevents = [\"jsonl:a.jsonl\", \"webhook:http://127.0.0.1:9/e\"]\n"));
  ASSERT_EQ(c.sources[0].events.size(), 2u);
  EXPECT_EQ(c.sources[0].events[1].kind, EventSinkSpec::Kind::kWebhook);
  EXPECT_EQ(c.sources[0].events[1].target, "http://127.0.0.1:9/e");
  EXPECT_THAT(error_for("[[source]]\nname = \"r\"\nurl = \"x.wav\"\nevents = \"webhook:https://h/\"\n"),
              HasSubstr("corepool.toml:4: source[0].events: source \"r\": \"https://h/\": a webhook needs an http:// URL"));
}

TEST_F(SourceConfigTest, AnUnknownKeyInASourceTableIsNamedWithItsIndex) {
  const std::string e =
      error_for("[[source]]\nname = \"r\"\nurl = \"x.wav\"\nevents = \"jsonl:a.jsonl\"\nbackof_s = 2\n");
  EXPECT_THAT(e, HasSubstr("corepool.toml:5: source[0].backof_s: unknown key"));
}

TEST_F(SourceConfigTest, WrongTypesAndRangesNameTheKey) {
  EXPECT_THAT(error_for("[[source]]\nname = \"r\"\nurl = 3\nevents = \"jsonl:a.jsonl\"\n"),
              HasSubstr("corepool.toml:3: source[0].url: expected a string, got an integer"));
  EXPECT_THAT(error_for("[[source]]\nname = \"r\"\nurl = \"x\"\nevents = \"jsonl:a\"\nbackoff_s = 0\n"),
              HasSubstr("source[0].backoff_s: must be between 0.01 and 3600, got 0"));
  EXPECT_THAT(error_for("[[source]]\nname = \"r\"\nurl = \"x\"\nevents = \"jsonl:a\"\nbackoff_s = 5\nbackoff_max_s = 2\n"),
              HasSubstr("source[0].backoff_max_s: source \"r\": must be at least backoff_s (5), got 2"));
  EXPECT_THAT(error_for("source = 3\n"), HasSubstr("corepool.toml:1: source: expected an array of tables ([[source]])"));
}

TEST_F(SourceConfigTest, SourceErrorNamesFileLineIndexSourceAndKey) {
  const Config c = load_config(write(kTwo));
  EXPECT_EQ(source_error(c.sources[1], "model", "bad"),
            temp_ / "corepool.toml" + ":10: source[1].model: source \"mic_0\": bad");
}

}  // namespace
}  // namespace corepool
