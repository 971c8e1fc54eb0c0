// The DCASE metrics of sound event detection as sed_eval (TUT-ARG/sed_eval,
// sed_eval/sound_event.py) defines them, in our own code, accumulated file by
// file: counts summed over files, rates computed once at the end (micro).
//
// Segment-based: time is cut into segments of `segment_seconds`; an event is
// active in segments floor(onset / s) .. ceil(offset / s) - 1. Per segment,
// overall: Ntp = labels active in both, Nref, Nsys, and S = min(Nref, Nsys) - Ntp,
// D = max(0, Nref - Nsys), I = max(0, Nsys - Nref). Per label: Ntp, Nfp
// (system only), Nfn (reference only); D = Nfn, I = Nfp, S = 0.
// Event-based: a system event hits a reference event with the same label when
// |onset difference| <= t_collar and |offset difference| <= max(t_collar,
// percentage_of_length * reference length). Hits are paired one to one by a
// maximum bipartite matching (sed_eval's "optimal" event matching): Ntp is its
// size (where several maximum matchings exist, which events are left over may
// differ from sed_eval's Hopcroft-Karp, and with it S against D + I; never Ntp).
// Overall, leftover pairs that would hit but for the label count as
// substitutions, greedily in list order; D = Nref - Ntp - S, I = Nsys - Ntp - S.
// Per label: the matching within the label, D = Nfn, I = Nfp, S = 0.
// Rates: P = Ntp / Nsys, R = Ntp / Nref, F = 2 Ntp / (Nref + Nsys) (= 2PR/(P+R)),
// ER = (S + D + I) / Nref. A rate whose denominator is 0 is undefined (NaN;
// sed_eval divides by eps instead), except F = 0 when only Ntp is 0.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "supervisor/eval/event_lists.h"

namespace corepool {

struct SedCounts {
  uint64_t nref = 0, nsys = 0, ntp = 0, nfp = 0, nfn = 0;
  uint64_t subs = 0, dels = 0, ins = 0;
  void operator+=(const SedCounts& o);
};

struct SedRates {
  double f_measure, precision, recall, error_rate, substitution_rate, deletion_rate, insertion_rate;
};
SedRates rates_of(const SedCounts& c);

struct SedMetrics {
  SedCounts overall;
  std::map<std::string, SedCounts> class_wise;  // every label of either side
};

// Adds one file's counts. `labels`: every label to report (a label absent from
// both lists still gets its row of zeros).
void add_segment_based(const std::vector<AnnotatedEvent>& reference, const std::vector<AnnotatedEvent>& estimated,
                       const std::vector<std::string>& labels, double segment_seconds, SedMetrics& metrics);
void add_event_based(const std::vector<AnnotatedEvent>& reference, const std::vector<AnnotatedEvent>& estimated,
                     const std::vector<std::string>& labels, double t_collar, double percentage_of_length,
                     SedMetrics& metrics);

}  // namespace corepool
