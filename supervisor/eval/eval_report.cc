// The tables and the JSON of `corepool eval`; see eval_report.h.
#include "supervisor/eval/eval_report.h"

#include <cmath>
#include <cstdio>

namespace corepool {
namespace {

using nlohmann::json;

json number_or_null(double v) { return std::isnan(v) ? json(nullptr) : json(v); }

json counts_json(const SedCounts& c) {
  const SedRates r = rates_of(c);
  return {{"Nref", c.nref}, {"Nsys", c.nsys}, {"Ntp", c.ntp}, {"Nfp", c.nfp}, {"Nfn", c.nfn},
          {"S", c.subs}, {"D", c.dels}, {"I", c.ins},
          {"f_measure", number_or_null(r.f_measure)}, {"precision", number_or_null(r.precision)},
          {"recall", number_or_null(r.recall)}, {"error_rate", number_or_null(r.error_rate)},
          {"substitution_rate", number_or_null(r.substitution_rate)},
          {"deletion_rate", number_or_null(r.deletion_rate)}, {"insertion_rate", number_or_null(r.insertion_rate)}};
}

json metrics_json(const SedMetrics& m) {
  json class_wise = json::object();
  for (const auto& [label, c] : m.class_wise) class_wise[label] = counts_json(c);
  return {{"overall", counts_json(m.overall)}, {"class_wise", class_wise}};
}

std::string cell(double v) {
  char buf[16];
  if (std::isnan(v)) return "      -";
  std::snprintf(buf, sizeof buf, " %6.3f", v);
  return buf;
}

std::string row(const std::string& name, const SedCounts& c) {
  char head[96];
  std::snprintf(head, sizeof head, "  %-18s %6llu %6llu", name.c_str(), static_cast<unsigned long long>(c.nref),
                static_cast<unsigned long long>(c.nsys));
  const SedRates r = rates_of(c);
  return head + cell(r.f_measure) + cell(r.precision) + cell(r.recall) + cell(r.error_rate) +
         cell(r.substitution_rate) + cell(r.deletion_rate) + cell(r.insertion_rate) + "\n";
}

std::string table(const std::string& title, const SedMetrics& m) {
  char head[160];
  std::snprintf(head, sizeof head, "  %-18s %6s %6s %6s %6s %6s %6s %6s %6s %6s\n", "label", "Nref", "Nsys", "F", "P",
                "R", "ER", "Sub", "Del", "Ins");
  std::string out = title + "\n" + head;
  for (const auto& [label, c] : m.class_wise) out += row(label, c);
  out += row("overall (micro)", m.overall);
  return out;
}

}  // namespace

json eval_json(const EvalReport& report, const EvalOptions& o) {
  json segment = metrics_json(report.segment_based);
  segment["segment_seconds"] = o.segment_seconds;
  json event = metrics_json(report.event_based);
  event["t_collar"] = o.t_collar;
  event["percentage_of_length"] = o.percentage_of_length;
  return {{"files", report.files}, {"segment_based", segment}, {"event_based", event}};
}

std::string eval_tables(const EvalReport& report, const EvalOptions& o) {
  char title[256];
  std::snprintf(title, sizeof title, "segment-based, %.2f s segments, %zu file(s) (Nref, Nsys: label-segments)",
                o.segment_seconds, report.files);
  std::string out = table(title, report.segment_based);
  std::snprintf(title, sizeof title,
                "\nevent-based, onset within %.0f ms, offset within max(%.0f ms, %.0f %% of the length), "
                "%zu file(s) (Nref, Nsys: events)",
                o.t_collar * 1e3, o.t_collar * 1e3, o.percentage_of_length * 100, report.files);
  return out + table(title, report.event_based);
}

}  // namespace corepool
