// soak-memory.png: one panel per mode, memory against the audio processed,
// one colour per allocator (and MALLOC_CONF): RSS solid, heap dashed, and in
// process mode the supervisor's own RSS dotted. The idle window after the load
// shows as a vertical drop at the right end (the audio no longer advances).
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "bench/soak_report.h"

namespace soak {
namespace {

// Colours by label, the same in every panel.
constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"};

std::string quoted(std::string s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// Dashed guides at 10 %, 20 % and 90 % of the audio: the baseline window and the last 10 %.
void guides(std::ofstream& gp, double audio_h) {
  gp << "unset arrow\nunset label\n";
  for (double at : {0.1, 0.2, 0.9}) {
    gp << fmt::format("set arrow from {0},graph 0 to {0},graph 1 nohead dt 3 lc rgb 'gray50'\n", at * audio_h);
  }
  gp << fmt::format("set label 'baseline' at {},graph 0.97 center tc rgb 'gray40'\n", 0.15 * audio_h);
  gp << fmt::format("set label 'last 10 %' at {},graph 0.97 center tc rgb 'gray40'\n", 0.95 * audio_h);
}

std::string title_of(const RunResult& r, bool repeats) {
  return r.label() + (repeats ? fmt::format(" #{}", r.repeat + 1) : "");
}

void panel(std::ofstream& gp, const std::string& mode, const std::vector<RunResult>& runs,
           const std::vector<std::string>& csv, const std::vector<std::string>& labels) {
  double audio_h = 0;
  bool repeats = false;
  for (const RunResult& r : runs) {
    if (r.mode == mode) audio_h = std::max(audio_h, r.audio_s / 3600);
    repeats = repeats || r.repeat > 0;
  }
  guides(gp, audio_h);
  const bool process = mode == "process";
  gp << "set title " << quoted(process ? "process mode: supervisor + workers (RSS, heap) and the supervisor alone (RSS)"
                                       : "thread mode: the one corepool process (RSS, heap)") << "\n";
  std::vector<std::string> lines;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].mode != mode) continue;
    const size_t colour = std::find(labels.begin(), labels.end(), runs[i].label()) - labels.begin();
    const std::string style = fmt::format("lw 2 lc rgb '{}'", kColours[colour % std::size(kColours)]);
    const std::string file = quoted(csv[i]), title = title_of(runs[i], repeats);
    lines.push_back(fmt::format("{} using 3:11 with lines {} title {}", file, style, quoted(title + ": RSS")));
    lines.push_back(fmt::format("{} using 3:13 with lines dt 2 {} title {}", file, style,
                                quoted(title + ": heap (anonymous PSS)")));
    if (process) lines.push_back(fmt::format("{} using 3:5 with lines dt 3 {} title {}", file, style,
                                quoted(title + ": supervisor RSS")));
  }
  gp << "plot ";
  for (size_t i = 0; i < lines.size(); ++i) gp << (i ? ", \\\n     " : "") << lines[i];
  gp << "\n";
}

}  // namespace

std::string plot(const std::string& dir, const std::vector<RunResult>& runs, const std::vector<std::string>& csv) {
  std::vector<std::string> modes, labels;
  for (const RunResult& r : runs) {
    if (std::find(modes.begin(), modes.end(), r.mode) == modes.end()) modes.push_back(r.mode);
    if (std::find(labels.begin(), labels.end(), r.label()) == labels.end()) labels.push_back(r.label());
  }
  std::ofstream gp(dir + "/soak-memory.gp");
  gp << fmt::format("set terminal pngcairo size 1400,{} font 'sans,11' noenhanced\n", 120 + 600 * modes.size());
  gp << "set output 'soak-memory.png'\nset datafile separator ','\nset grid\n"
     << "set key below maxcols 2 width 2 height 1\nset xlabel 'audio processed (hours)'\n"
     << "set ylabel 'memory (MiB)'\nset yrange [0:*]\n";
  gp << fmt::format("set multiplot layout {},1 title 'corepool serve: memory while tagging audio; "
                    "the drop at the right end is the idle window after the load'\n", modes.size());
  for (const auto& mode : modes) panel(gp, mode, runs, csv, labels);
  gp << "unset multiplot\n";
  gp.close();
  const std::string cmd = "cd '" + dir + "' && gnuplot soak-memory.gp";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("gnuplot failed: " + cmd);
  return dir + "/soak-memory.png";
}

}  // namespace soak
