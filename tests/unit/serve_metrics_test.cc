// Prometheus text from ServeMetrics (supervisor/triton/serve_metrics.cc): HELP/TYPE
// once per family, cumulative buckets, escaped labels, every snapshot part.
#include "supervisor/triton/serve_metrics.h"

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace corepool {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ServeMetricsTest, LatencyBucketsAreCumulativeAndCountsByEndpointCodeAndProtocol) {
  ServeMetrics m;
  m.observe("http", "infer", 200, 0.0003);
  m.observe("http", "infer", 200, 0.02);
  m.observe("http", "infer", 503, 20.0);  // above the last bucket: only +Inf
  m.observe("grpc", "infer", 200, 0.001);
  const std::string text = m.render({});
  EXPECT_THAT(text, HasSubstr("corepool_requests_total{endpoint=\"infer\",code=\"200\",protocol=\"http\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("corepool_requests_total{endpoint=\"infer\",code=\"503\",protocol=\"http\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("corepool_request_duration_seconds_bucket{endpoint=\"infer\",protocol=\"http\",le=\"0.00025\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("corepool_request_duration_seconds_bucket{endpoint=\"infer\",protocol=\"http\",le=\"0.0005\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("corepool_request_duration_seconds_bucket{endpoint=\"infer\",protocol=\"http\",le=\"0.025\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("corepool_request_duration_seconds_bucket{endpoint=\"infer\",protocol=\"http\",le=\"10\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("corepool_request_duration_seconds_bucket{endpoint=\"infer\",protocol=\"http\",le=\"+Inf\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("corepool_request_duration_seconds_count{endpoint=\"infer\",protocol=\"http\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("corepool_requests_total{endpoint=\"infer\",code=\"200\",protocol=\"grpc\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("corepool_request_duration_seconds_count{endpoint=\"infer\",protocol=\"grpc\"} 1\n"));
}

TEST(ServeMetricsTest, EachFamilyHasOneHelpAndTypeLine) {
  ServeMetrics m;
  m.observe("http", "live", 200, 0.001);
  m.observe("grpc", "infer", 200, 0.001);
  const std::string text = m.render({});
  size_t count = 0;
  for (size_t at = 0; (at = text.find("# TYPE corepool_requests_total counter", at)) != std::string::npos; ++at) ++count;
  EXPECT_EQ(count, 1u);
  EXPECT_THAT(text, HasSubstr("# TYPE corepool_request_duration_seconds histogram"));
  EXPECT_EQ(text.back(), '\n');
}

// The text format: a family's samples come right after its own HELP and TYPE
// lines, never after another family's (a scraper refuses the page otherwise).
TEST(ServeMetricsTest, EverySampleFollowsItsOwnFamilysTypeLineWithStreamsOpen) {
  ServeSnapshot s;
  s.streams = {StreamStat{1, 2.5, 3, 0, 0.5}, StreamStat{2, 1.0, 0, 1, 0.25}};
  const std::string text = ServeMetrics().render(s);
  std::string family;
  size_t samples = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    if (line.rfind("# TYPE ", 0) == 0) {
      family = line.substr(7, line.find(' ', 7) - 7);
    } else if (!line.empty() && line[0] != '#') {
      const std::string name = line.substr(0, line.find_first_of("{ "));
      EXPECT_TRUE(name == family || name.rfind(family + "_", 0) == 0) << line << " after # TYPE " << family;
      ++samples;
    }
  }
  EXPECT_GT(samples, 10u);
  EXPECT_THAT(text, HasSubstr("corepool_stream_events{stream=\"1\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("corepool_stream_lag_seconds{stream=\"2\"} 0.25\n"));
  EXPECT_THAT(text, Not(HasSubstr("corepool_stream_lag_seconds{stream=\"all\"}")));  // a gauge of open streams only
}

// Ten decisions by hand: 4 of 2 ms in (0.001, 0.0025], 5 of 60 ms in
// (0.05, 0.075], one of 20 s past the last bound (+Inf).
HistogramCounts ten_decisions() {
  LatencyHistogram h(kDecisionBuckets);
  for (int i = 0; i < 4; ++i) h.observe(0.002);
  for (int i = 0; i < 5; ++i) h.observe(0.06);
  h.observe(20.0);
  return h.counts();
}

TEST(ServeMetricsTest, DecisionQuantilesInterpolateInsideTheirBucketAsPrometheusDoes) {
  const HistogramCounts c = ten_decisions();
  ASSERT_EQ(c.count, 10u);
  EXPECT_DOUBLE_EQ(c.sum, 4 * 0.002 + 5 * 0.06 + 20.0);
  // p10: rank 1 of the 4 in (0.001, 0.0025]: 0.001 + 0.0015 * 1/4.
  EXPECT_NEAR(c.quantile(0.10), 0.001375, 1e-12);
  // p40: rank 4, the top of that bucket.
  EXPECT_NEAR(c.quantile(0.40), 0.0025, 1e-12);
  // p50: rank 5, the 1st of 5 in (0.05, 0.075]: 0.05 + 0.025 * 1/5.
  EXPECT_NEAR(c.quantile(0.50), 0.055, 1e-12);
  // p99: rank 9.9 is in +Inf: the last bound.
  EXPECT_DOUBLE_EQ(c.quantile(0.99), 10.0);
  EXPECT_DOUBLE_EQ(HistogramCounts{}.quantile(0.5), 0.0);
}

TEST(ServeMetricsTest, DecisionHistogramIsRenderedCumulativeUnderItsOwnType) {
  ServeSnapshot s;
  s.stream_decisions = ten_decisions();
  const std::string text = ServeMetrics().render(s);
  EXPECT_THAT(text, HasSubstr("# TYPE corepool_stream_decision_seconds histogram\n"));
  EXPECT_THAT(text, HasSubstr("corepool_stream_decision_seconds_bucket{le=\"0.001\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("corepool_stream_decision_seconds_bucket{le=\"0.0025\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("corepool_stream_decision_seconds_bucket{le=\"0.05\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("corepool_stream_decision_seconds_bucket{le=\"0.075\"} 9\n"));
  EXPECT_THAT(text, HasSubstr("corepool_stream_decision_seconds_bucket{le=\"10\"} 9\n"));
  EXPECT_THAT(text, HasSubstr("corepool_stream_decision_seconds_bucket{le=\"+Inf\"} 10\n"));
  EXPECT_THAT(text, HasSubstr("corepool_stream_decision_seconds_count 10\n"));
}

TEST(ServeMetricsTest, SnapshotPartsAppearWithTheirLabels) {
  ServeSnapshot s;
  s.mode = "process";
  s.model = "we\"ird\\name";
  s.generation = 2;
  s.executor.outstanding = 3;
  s.executor.depth = 32;
  s.executor.busy_seconds = {1.5, 2.25};
  s.executor.all_ready = true;
  s.executor.restarts = 4;
  s.http.connections_open = 7;
  s.http.responses_by_status[408] = 1;
  s.memory = {{"supervisor", read_process_memory(::getpid())}, {"worker-0", ProcessMemory{1, 2}}};
  s.allocator = {{"allocated", 123}};
  const std::string text = ServeMetrics().render(s);
  EXPECT_THAT(text, HasSubstr("corepool_info{mode=\"process\",model=\"we\\\"ird\\\\name\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("corepool_generation 2\n"));
  EXPECT_THAT(text, HasSubstr("corepool_queue_depth 3\n"));
  EXPECT_THAT(text, HasSubstr("corepool_queue_capacity 32\n"));
  EXPECT_THAT(text, HasSubstr("corepool_worker_busy_seconds_total{worker=\"1\"} 2.25\n"));
  EXPECT_THAT(text, HasSubstr("corepool_workers_ready 1\n"));
  EXPECT_THAT(text, HasSubstr("corepool_worker_restarts_total 4\n"));
  EXPECT_THAT(text, HasSubstr("corepool_http_connections_open 7\n"));
  EXPECT_THAT(text, HasSubstr("corepool_http_responses_total{code=\"408\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("corepool_memory_rss_bytes{process=\"worker-0\"} 1024\n"));
  EXPECT_THAT(text, HasSubstr("corepool_memory_pss_bytes{process=\"worker-0\"} 2048\n"));
  EXPECT_THAT(text, HasSubstr("corepool_memory_pss_bytes{process=\"supervisor\"}"));
  EXPECT_THAT(text, HasSubstr("corepool_allocator_bytes{stat=\"allocated\"} 123\n"));
}

TEST(ServeMetricsTest, ProcessMemoryOfThisProcessIsReadAndOfAGonePidIsUnknown) {
  const ProcessMemory self = read_process_memory(::getpid());
  EXPECT_GT(self.rss_kb, 0);
  EXPECT_GT(self.pss_kb, 0);
  EXPECT_EQ(read_process_memory(0x7ffffff0).rss_kb, -1);
  EXPECT_THAT(ServeMetrics().render({}), Not(HasSubstr("corepool_allocator_bytes{")));  // no jemalloc in unit tests
}

}  // namespace
}  // namespace corepool
