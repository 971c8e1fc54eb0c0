// `corepool eval`'s numbers on a case small enough to count by hand
// (tests/unit/data/eval/): two files, three labels, five reference and five
// system events, read from both reference forms (a three-column list named
// after its file; a four-column list with a header) and both result forms
// (batch's JSON Lines; --format dcase). The expected values are worked out in
// the comments below, and again by sed_eval's algorithm re-implemented in
// Python beside the data (sed_eval_reference.py, its output committed).
#include <cstdio>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "supervisor/eval/eval.h"
#include "supervisor/eval/event_lists.h"
#include "tests/support/temp_dir.h"

namespace corepool {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

const std::string kData = std::string(COREPOOL_UNIT_TEST_DATA) + "/eval";

struct EvalRun {
  ExitCode code;
  std::string out, err;
};

EvalRun eval(const std::string& reference, const std::string& results, bool as_json) {
  EvalOptions o;
  o.reference_dir = reference;
  o.results_dir = results;
  o.json = as_json;
  char *out = nullptr, *err = nullptr;
  size_t out_size = 0, err_size = 0;
  std::FILE* out_file = open_memstream(&out, &out_size);
  std::FILE* err_file = open_memstream(&err, &err_size);
  const ExitCode code = run_eval(o, out_file, err_file);
  std::fclose(out_file);
  std::fclose(err_file);
  EvalRun r{code, out, err};
  std::free(out);
  std::free(err);
  return r;
}

json metrics() {
  const EvalRun r = eval(kData + "/reference", kData + "/results", true);
  EXPECT_EQ(r.code, ExitCode::kOk) << r.err;
  EXPECT_EQ(r.err, "");
  return json::parse(r.out);
}

void expect_rates(const json& m, double f, double p, double r, double er) {
  EXPECT_NEAR(m.at("f_measure").get<double>(), f, 1e-12) << m.dump();
  EXPECT_NEAR(m.at("precision").get<double>(), p, 1e-12) << m.dump();
  EXPECT_NEAR(m.at("recall").get<double>(), r, 1e-12) << m.dump();
  EXPECT_NEAR(m.at("error_rate").get<double>(), er, 1e-12) << m.dump();
}

// The case (collar 0.2 s, offset tolerance max(0.2 s, 20 % of the reference's length)):
//   a: reference dog 0-2, car 3-6, speech 7-8
//      system    dog 0.1-2.3, car 3.5-6.0, dog 7.1-8.1
//   b: reference car 1-11, dog 12-12.5
//      system    car 1.15-9.5, speech 13-14
TEST(EvalTest, EventBasedMatchesTheHandCount) {
  const json ev = metrics().at("event_based");
  // a: dog 0.1-2.3 hits dog 0-2 (onset off by 0.1; offset by 0.3 <= max(0.2, 0.2 * 2 = 0.4)).
  //    car 3.5-6.0 misses car 3-6 (onset off by 0.5 > 0.2).
  //    dog 7.1-8.1 has speech 7-8's times but not its label: one substitution.
  //    Ntp 1, S 1, D = 3 - 1 - 1 = 1, I = 3 - 1 - 1 = 1.
  // b: car 1.15-9.5 hits car 1-11 (offset off by 1.5 <= max(0.2, 0.2 * 10 = 2.0): the length rule).
  //    dog 12-12.5 is missed (D 1); speech 13-14 is inserted (I 1); their onsets are 1 s apart: no S.
  // Overall: Nref 5, Nsys 5, Ntp 2, S 1, D 2, I 2:
  //    P = 2/5 = 0.4, R = 2/5 = 0.4, F = 0.4, ER = (1 + 2 + 2) / 5 = 1.0.
  const json& all = ev.at("overall");
  EXPECT_EQ(all.at("Nref"), 5);
  EXPECT_EQ(all.at("Nsys"), 5);
  EXPECT_EQ(all.at("Ntp"), 2);
  EXPECT_EQ(all.at("S"), 1);
  EXPECT_EQ(all.at("D"), 2);
  EXPECT_EQ(all.at("I"), 2);
  expect_rates(all, 0.4, 0.4, 0.4, 1.0);
  EXPECT_NEAR(all.at("substitution_rate").get<double>(), 0.2, 1e-12);
  // Per label (no substitutions class-wise: a wrong label is a deletion and an insertion):
  //   car:    Nref 2, Nsys 2, Ntp 1: P 0.5, R 0.5, F 0.5, ER (1 + 1) / 2 = 1.0
  //   dog:    Nref 2, Nsys 2, Ntp 1: the same
  //   speech: Nref 1, Nsys 1, Ntp 0: P 0, R 0, F 0, ER (1 + 1) / 1 = 2.0
  expect_rates(ev.at("class_wise").at("car"), 0.5, 0.5, 0.5, 1.0);
  expect_rates(ev.at("class_wise").at("dog"), 0.5, 0.5, 0.5, 1.0);
  expect_rates(ev.at("class_wise").at("speech"), 0.0, 0.0, 0.0, 2.0);
  EXPECT_EQ(ev.at("class_wise").at("speech").at("S"), 0);
}

TEST(EvalTest, SegmentBasedMatchesTheHandCount) {
  const json seg = metrics().at("segment_based");
  // 1 s segments; an event covers floor(onset) .. ceil(offset) - 1.
  // a: reference dog {0,1}, car {3,4,5}, speech {7}; system dog {0,1,2} + {7,8}, car {3,4,5}.
  //    segments 0,1,3,4,5: one true positive each (5); 2 and 8: one insertion each;
  //    7: speech against dog, Nref 1 = Nsys 1, Ntp 0: one substitution.
  //    Nref 6, Nsys 8, Ntp 5, S 1, D 0, I 2.
  // b: reference car {1..10}, dog {12}; system car {1..9}, speech {13}.
  //    1..9: 9 true positives; 10 and 12: one deletion each; 13: one insertion.
  //    Nref 11, Nsys 10, Ntp 9, S 0, D 2, I 1.
  // Overall: Nref 17, Nsys 18, Ntp 14, S 1, D 2, I 3:
  //    P = 14/18, R = 14/17, F = 2 * 14 / (17 + 18) = 0.8, ER = (1 + 2 + 3) / 17 = 6/17.
  const json& all = seg.at("overall");
  EXPECT_EQ(all.at("Nref"), 17);
  EXPECT_EQ(all.at("Nsys"), 18);
  EXPECT_EQ(all.at("Ntp"), 14);
  EXPECT_EQ(all.at("S"), 1);
  EXPECT_EQ(all.at("D"), 2);
  EXPECT_EQ(all.at("I"), 3);
  expect_rates(all, 0.8, 14.0 / 18, 14.0 / 17, 6.0 / 17);
  // Per label, ER = (Nfn + Nfp) / Nref:
  //   car:    ref {3,4,5} + {1..10} = 13, sys {3,4,5} + {1..9} = 12, Ntp 12:
  //           P 1, R 12/13, F 24/25, ER (1 + 0) / 13
  //   dog:    ref {0,1} + {12} = 3, sys {0,1,2,7,8} = 5, Ntp 2: P 2/5, R 2/3, F 4/8, ER (1 + 3) / 3
  //   speech: ref {7}, sys {13}, Ntp 0: P 0, R 0, F 0, ER (1 + 1) / 1
  expect_rates(seg.at("class_wise").at("car"), 24.0 / 25, 1.0, 12.0 / 13, 1.0 / 13);
  expect_rates(seg.at("class_wise").at("dog"), 0.5, 0.4, 2.0 / 3, 4.0 / 3);
  expect_rates(seg.at("class_wise").at("speech"), 0.0, 0.0, 0.0, 2.0);
}

TEST(EvalTest, AgreesWithTheIndependentPythonReimplementationOfSedEval) {
  std::ifstream in(kData + "/sed_eval_reference.out.json");
  ASSERT_TRUE(in);
  const json want = json::parse(in);
  const json got = metrics();
  for (const char* kind : {"segment_based", "event_based"}) {
    SCOPED_TRACE(kind);
    const json& w = want.at(kind);
    const json& g = got.at(kind);
    const auto& o = w.at("overall");
    expect_rates(g.at("overall"), o.at("f_measure"), o.at("precision"), o.at("recall"), o.at("error_rate"));
    ASSERT_EQ(g.at("class_wise").size(), w.at("class_wise").size());
    for (const auto& [label, c] : w.at("class_wise").items()) {
      SCOPED_TRACE(label);
      expect_rates(g.at("class_wise").at(label), c.at("f_measure"), c.at("precision"), c.at("recall"),
                   c.at("error_rate"));
    }
  }
}

TEST(EvalTest, TheTablesShowEveryLabelAndTheOverallRow) {
  const EvalRun r = eval(kData + "/reference", kData + "/results", false);
  ASSERT_EQ(r.code, ExitCode::kOk) << r.err;
  EXPECT_THAT(r.out, HasSubstr("  label                Nref   Nsys      F      P      R     ER    Sub    Del    Ins\n"));
  EXPECT_THAT(r.out, HasSubstr("  overall (micro)        17     18  0.800  0.778  0.824  0.353  0.059  0.118  0.176\n"));
  EXPECT_THAT(r.out, HasSubstr("  overall (micro)         5      5  0.400  0.400  0.400  1.000  0.200  0.400  0.400\n"));
  EXPECT_THAT(r.out, HasSubstr("  speech                  1      1  0.000  0.000  0.000  2.000  0.000  1.000  1.000\n"));
}

TEST(EvalTest, AReferenceWithoutAResultIsAnErrorNamingIt) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "ref");
  std::filesystem::create_directories(dir / "res");
  std::ofstream(dir / "ref/a.txt") << "0\t1\tdog\n";
  std::ofstream(dir / "ref/c.txt") << "0\t1\tdog\n";
  std::ofstream(dir / "res/a.wav.tsv") << "filename\tonset\toffset\tevent_label\na.wav\t0\t1\tdog\n";
  std::ofstream(dir / "res/extra.wav.tsv") << "filename\tonset\toffset\tevent_label\n";
  const EvalRun r = eval(dir / "ref", dir / "res", true);
  EXPECT_EQ(r.code, ExitCode::kEvalUnmatched);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "error: " + (dir / "ref/c.txt") + ": no result for 'c' in " + (dir / "res") + "\n");

  std::filesystem::remove(dir / "ref/c.txt");
  const EvalRun ok = eval(dir / "ref", dir / "res", true);
  EXPECT_EQ(ok.code, ExitCode::kOk);
  EXPECT_EQ(ok.err, "warning: " + (dir / "res/extra.wav.tsv") + ": no reference for 'extra', left out\n");
  EXPECT_EQ(json::parse(ok.out).at("event_based").at("overall").at("f_measure"), 1.0);
}

TEST(EvalTest, ALabelOnlyTheSystemKnowsHasUndefinedRecallAndErrorRate) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "ref");
  std::filesystem::create_directories(dir / "res");
  std::ofstream(dir / "ref/a.txt") << "0\t2\tdog\n";
  std::ofstream(dir / "res/a.wav.tsv") << "filename\tonset\toffset\tevent_label\na.wav\t0\t2\tdog\na.wav\t4\t5\tcat\n";
  const EvalRun r = eval(dir / "ref", dir / "res", true);
  ASSERT_EQ(r.code, ExitCode::kOk) << r.err;
  const json cat = json::parse(r.out).at("event_based").at("class_wise").at("cat");
  // cat: Nref 0, Nsys 1, Ntp 0: P = 0/1 = 0, F = 0/(0 + 1) = 0; R and ER divide by Nref = 0.
  EXPECT_EQ(cat.at("precision"), 0.0);
  EXPECT_EQ(cat.at("f_measure"), 0.0);
  EXPECT_TRUE(cat.at("recall").is_null());
  EXPECT_TRUE(cat.at("error_rate").is_null());
  const EvalRun table = eval(dir / "ref", dir / "res", false);
  EXPECT_THAT(table.out, HasSubstr("  cat                     0      1  0.000  0.000      -      -      -      -      -\n"));
}

TEST(EvalTest, MalformedListsNameTheFileAndLine) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "ref");
  std::filesystem::create_directories(dir / "res");
  std::ofstream(dir / "res/a.wav.jsonl") << R"({"file":"a.wav","summary":{}})" << "\n";
  std::ofstream(dir / "ref/a.txt") << "0\t1\tdog\n1.5\tsoon\tcat\n";
  EvalRun r = eval(dir / "ref", dir / "res", false);
  EXPECT_EQ(r.code, ExitCode::kUsage);
  EXPECT_EQ(r.err, "corepool eval: " + (dir / "ref/a.txt") +
                       ":2: onset '1.5' or offset 'soon' is not a time in seconds (0 to 1e7)\n");

  std::ofstream(dir / "ref/a.txt") << "2\t1\tdog\n";
  r = eval(dir / "ref", dir / "res", false);
  EXPECT_THAT(r.err, HasSubstr(dir / "ref/a.txt" + ":1: offset 1 is before onset 2"));

  std::ofstream(dir / "ref/a.txt") << "0\t1\tdog\n";
  std::ofstream(dir / "res/a.wav.jsonl") << R"({"file":"a.wav","start":0,"end":1,"label":"dog","score":1})" << "\n";
  r = eval(dir / "ref", dir / "res", false);
  EXPECT_EQ(r.code, ExitCode::kUsage);
  EXPECT_THAT(r.err, HasSubstr(dir / "res/a.wav.jsonl" + ": no summary line"));

  std::ofstream(dir / "ref/a.txt") << "a.wav,0,1,dog\n";
  r = eval(dir / "ref", dir / "res", false);
  EXPECT_THAT(r.err, HasSubstr(dir / "ref/a.txt" + ":1: one column holding commas"));

  std::ofstream(dir / "ref/a.txt") << "0\t1\tdog\n";
  std::ofstream(dir / "res/a.wav.jsonl") << R"({"file":"a.wav","start":-1,"end":1,"label":"dog","score":1})" << "\n"
                                         << R"({"file":"a.wav","summary":{}})" << "\n";
  r = eval(dir / "ref", dir / "res", false);
  EXPECT_THAT(r.err, HasSubstr(dir / "res/a.wav.jsonl" + ":1: an event needs 0 <= start <= end <= 1e7 seconds"));

  r = eval(dir / "nowhere", dir / "res", false);
  EXPECT_EQ(r.err, "corepool eval: " + (dir / "nowhere") + ": not a directory\n");
}

TEST(EvalTest, FilesPairByNameWithoutDirectoryAndExtension) {
  EXPECT_EQ(file_key("audio/sub/demo.wav"), "demo");
  EXPECT_EQ(file_key("Y-abc_50.000_60.000.wav"), "Y-abc_50.000_60.000");
  EXPECT_EQ(file_key("stdin"), "stdin");
  EXPECT_EQ(file_key(".hidden"), ".hidden");
}

}  // namespace
}  // namespace corepool
