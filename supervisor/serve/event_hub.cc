// EventHub: see event_hub.h. A subscriber's connection calls its handler on
// the HTTP loop thread; publish() runs on executor and source threads and
// only posts bytes to the loop (WsSender::raw), under the hub's lock so that
// a subscriber removed meanwhile is not written to.
#include "supervisor/serve/event_hub.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace corepool {

class EventHub::Subscriber final : public WsHandler {
 public:
  Subscriber(EventHub& hub, WsSender sender) : hub_(hub), sender_(std::move(sender)) {}
  void send(const std::string& bytes) { sender_.raw(bytes); }

  void on_text(std::string&&) override {}
  void on_binary(std::string&&) override {}
  void on_client_close(std::uint16_t) override { sender_.end(); }
  void on_idle() override { sender_.raw(": keep-alive\n\n"); }  // proxies close silent connections
  void on_server_stop() override { sender_.end(); }
  void on_dropped() override { hub_.dropped_.fetch_add(1); }
  void on_gone(const std::string&) override { hub_.remove(this); }

 private:
  EventHub& hub_;
  WsSender sender_;
};

namespace {

// A stream's output, its events also published.
class TappedOutput final : public StreamOutput {
 public:
  TappedOutput(std::unique_ptr<StreamOutput> inner, EventHub& hub, uint64_t stream, std::string model)
      : inner_(std::move(inner)), hub_(hub), stream_(stream), model_(std::move(model)) {}

  bool event(std::string json) override {
    nlohmann::ordered_json e = {{"stream", stream_}, {"model", model_}};
    const nlohmann::json inner = nlohmann::json::parse(json, nullptr, false);
    if (inner.is_object()) {
      for (const auto& [key, value] : inner.items()) e[key] = value;
    }
    hub_.publish("event", e.dump());
    return inner_->event(std::move(json));
  }

  void close(StreamEnd how, const std::string& reason, std::string summary) override {
    nlohmann::ordered_json e = {{"stream", stream_}, {"model", model_}, {"end", stream_end_name(how)}};
    if (!summary.empty()) e["summary"] = nlohmann::json::parse(summary, nullptr, false);
    if (!reason.empty()) e["reason"] = reason;
    hub_.publish("end", e.dump());
    inner_->close(how, reason, std::move(summary));
  }

 private:
  std::unique_ptr<StreamOutput> inner_;
  EventHub& hub_;
  const uint64_t stream_;
  const std::string model_;
};

}  // namespace

void EventHub::publish(const std::string& name, const std::string& json) {
  const std::string bytes = "event: " + name + "\ndata: " + json + "\n\n";
  std::lock_guard<std::mutex> lock(mu_);
  published_.fetch_add(1);
  for (const auto& s : subscribers_) s->send(bytes);
}

std::shared_ptr<WsHandler> EventHub::subscribe(WsSender sender) {
  std::lock_guard<std::mutex> lock(mu_);
  if (subscribers_.size() >= kMaxSubscribers) return nullptr;
  subscribers_.push_back(std::make_shared<Subscriber>(*this, std::move(sender)));
  return subscribers_.back();
}

std::unique_ptr<StreamOutput> EventHub::tap(std::unique_ptr<StreamOutput> inner, const std::string& model) {
  return std::make_unique<TappedOutput>(std::move(inner), *this, streams_.fetch_add(1) + 1, model);
}

size_t EventHub::subscribers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return subscribers_.size();
}

void EventHub::remove(const Subscriber* s) {
  std::lock_guard<std::mutex> lock(mu_);
  subscribers_.erase(std::remove_if(subscribers_.begin(), subscribers_.end(),
                                    [s](const auto& p) { return p.get() == s; }),
                     subscribers_.end());
}

}  // namespace corepool
