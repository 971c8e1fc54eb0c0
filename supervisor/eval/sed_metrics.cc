// The segment- and event-based counts; the definitions are in sed_metrics.h.
#include "supervisor/eval/sed_metrics.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace corepool {
namespace {

constexpr double kUndefined = std::numeric_limits<double>::quiet_NaN();

double ratio(uint64_t num, uint64_t den) { return den == 0 ? kUndefined : double(num) / double(den); }

// roll[label][segment]: is the label active in the segment.
using Roll = std::vector<std::vector<char>>;

Roll event_roll(const std::vector<AnnotatedEvent>& events, const std::vector<std::string>& labels, double seconds,
                int64_t length) {
  Roll roll(labels.size(), std::vector<char>(static_cast<size_t>(length), 0));
  for (const AnnotatedEvent& e : events) {
    const size_t row = static_cast<size_t>(std::find(labels.begin(), labels.end(), e.label) - labels.begin());
    const int64_t first = static_cast<int64_t>(std::floor(e.onset / seconds));
    const int64_t end = static_cast<int64_t>(std::ceil(e.offset / seconds));
    for (int64_t k = first; k < end; ++k) roll[row][static_cast<size_t>(k)] = 1;
  }
  return roll;
}

int64_t segments_needed(const std::vector<AnnotatedEvent>& events, double seconds) {
  int64_t n = 0;
  for (const AnnotatedEvent& e : events) n = std::max(n, static_cast<int64_t>(std::ceil(e.offset / seconds)));
  return n;
}

bool times_hit(const AnnotatedEvent& ref, const AnnotatedEvent& est, double collar, double fraction) {
  const double length = ref.offset - ref.onset;
  return std::fabs(ref.onset - est.onset) <= collar &&
         std::fabs(ref.offset - est.offset) <= std::max(collar, fraction * length);
}

// Maximum bipartite matching (Kuhn's augmenting paths), references tried in
// list order. Returns, for each estimated event, its reference or -1.
std::vector<int> max_matching(size_t refs, size_t ests, const std::function<bool(size_t, size_t)>& hit) {
  std::vector<int> owner(ests, -1);
  std::vector<char> seen;
  std::function<bool(size_t)> augment = [&](size_t j) {
    for (size_t i = 0; i < ests; ++i) {
      if (seen[i] || !hit(j, i)) continue;
      seen[i] = 1;
      if (owner[i] < 0 || augment(static_cast<size_t>(owner[i]))) {
        owner[i] = static_cast<int>(j);
        return true;
      }
    }
    return false;
  };
  for (size_t j = 0; j < refs; ++j) {
    seen.assign(ests, 0);
    augment(j);
  }
  return owner;
}

uint64_t count_label(const std::vector<AnnotatedEvent>& events, const std::string& label) {
  return static_cast<uint64_t>(
      std::count_if(events.begin(), events.end(), [&](const AnnotatedEvent& e) { return e.label == label; }));
}

}  // namespace

void SedCounts::operator+=(const SedCounts& o) {
  nref += o.nref;
  nsys += o.nsys;
  ntp += o.ntp;
  nfp += o.nfp;
  nfn += o.nfn;
  subs += o.subs;
  dels += o.dels;
  ins += o.ins;
}

SedRates rates_of(const SedCounts& c) {
  SedRates r;
  r.precision = ratio(c.ntp, c.nsys);
  r.recall = ratio(c.ntp, c.nref);
  r.f_measure = ratio(2 * c.ntp, c.nref + c.nsys);
  r.substitution_rate = ratio(c.subs, c.nref);
  r.deletion_rate = ratio(c.dels, c.nref);
  r.insertion_rate = ratio(c.ins, c.nref);
  r.error_rate = ratio(c.subs + c.dels + c.ins, c.nref);
  return r;
}

void add_segment_based(const std::vector<AnnotatedEvent>& reference, const std::vector<AnnotatedEvent>& estimated,
                       const std::vector<std::string>& labels, double seconds, SedMetrics& m) {
  // Both rolls as long as the longer (sed_eval pads the shorter with silence).
  const int64_t length = std::max(segments_needed(reference, seconds), segments_needed(estimated, seconds));
  const Roll ref = event_roll(reference, labels, seconds, length);
  const Roll sys = event_roll(estimated, labels, seconds, length);
  for (size_t k = 0; k < static_cast<size_t>(length); ++k) {
    uint64_t nref = 0, nsys = 0, ntp = 0;
    for (size_t l = 0; l < labels.size(); ++l) {
      nref += ref[l][k];
      nsys += sys[l][k];
      ntp += ref[l][k] && sys[l][k];
    }
    SedCounts seg;
    seg.nref = nref;
    seg.nsys = nsys;
    seg.ntp = ntp;
    seg.nfp = nsys - ntp;
    seg.nfn = nref - ntp;
    seg.subs = std::min(nref, nsys) - ntp;
    seg.dels = nref > nsys ? nref - nsys : 0;
    seg.ins = nsys > nref ? nsys - nref : 0;
    m.overall += seg;
  }
  for (size_t l = 0; l < labels.size(); ++l) {
    SedCounts c;
    for (size_t k = 0; k < static_cast<size_t>(length); ++k) {
      c.nref += ref[l][k];
      c.nsys += sys[l][k];
      c.ntp += ref[l][k] && sys[l][k];
    }
    c.nfp = c.ins = c.nsys - c.ntp;
    c.nfn = c.dels = c.nref - c.ntp;
    m.class_wise[labels[l]] += c;
  }
}

void add_event_based(const std::vector<AnnotatedEvent>& reference, const std::vector<AnnotatedEvent>& estimated,
                     const std::vector<std::string>& labels, double collar, double fraction, SedMetrics& m) {
  auto hit = [&](size_t j, size_t i) {
    return reference[j].label == estimated[i].label && times_hit(reference[j], estimated[i], collar, fraction);
  };
  const std::vector<int> owner = max_matching(reference.size(), estimated.size(), hit);
  std::vector<char> ref_matched(reference.size(), 0);
  SedCounts all;
  all.nref = reference.size();
  all.nsys = estimated.size();
  for (int j : owner) {
    if (j >= 0) {
      ref_matched[static_cast<size_t>(j)] = 1;
      ++all.ntp;
    }
  }
  // Substitutions: the events left over on both sides that hit but for the label.
  std::vector<char> sys_counted(estimated.size(), 0);
  for (size_t j = 0; j < reference.size(); ++j) {
    if (ref_matched[j]) continue;
    for (size_t i = 0; i < estimated.size(); ++i) {
      if (owner[i] >= 0 || sys_counted[i] || !times_hit(reference[j], estimated[i], collar, fraction)) continue;
      sys_counted[i] = 1;
      ++all.subs;
      break;
    }
  }
  all.nfp = all.ins = all.nsys - all.ntp - all.subs;
  all.nfn = all.dels = all.nref - all.ntp - all.subs;
  m.overall += all;
  // Per label: the same matching restricted to the label (hits never cross labels).
  for (const std::string& label : labels) {
    SedCounts c;
    c.nref = count_label(reference, label);
    c.nsys = count_label(estimated, label);
    for (size_t i = 0; i < owner.size(); ++i) c.ntp += owner[i] >= 0 && estimated[i].label == label;
    c.nfp = c.ins = c.nsys - c.ntp;
    c.nfn = c.dels = c.nref - c.ntp;
    m.class_wise[label] += c;
  }
}

}  // namespace corepool
