#include "core/room_event.h"

namespace anteroom::core {

const char* ToString(QueueingMethod method) {
  switch (method) {
    case QueueingMethod::kFifo:
      return "fifo";
    case QueueingMethod::kRandom:
      return "random";
    case QueueingMethod::kPassthrough:
      return "passthrough";
    case QueueingMethod::kReject:
      return "reject";
    case QueueingMethod::kQueueAll:
      return "queue_all";
  }
  return "fifo";
}

std::optional<QueueingMethod> ParseQueueingMethod(std::string_view name) {
  for (auto m : {QueueingMethod::kFifo, QueueingMethod::kRandom, QueueingMethod::kPassthrough,
                 QueueingMethod::kReject, QueueingMethod::kQueueAll}) {
    if (name == ToString(m)) return m;
  }
  return std::nullopt;
}

const char* ToString(PrequeueScope scope) { return scope == PrequeueScope::kAll ? "all" : "new"; }

std::optional<PrequeueScope> ParsePrequeueScope(std::string_view name) {
  if (name == "new") return PrequeueScope::kNew;
  if (name == "all") return PrequeueScope::kAll;
  return std::nullopt;
}

const char* ToString(EventStage stage) {
  switch (stage) {
    case EventStage::kScheduled:
      return "scheduled";
    case EventStage::kPrequeue:
      return "prequeue";
    case EventStage::kRunning:
      return "running";
    case EventStage::kEnded:
      return "ended";
  }
  return "scheduled";
}

const char* ToString(RoomPhase phase) {
  switch (phase) {
    case RoomPhase::kOpen:
      return "open";
    case RoomPhase::kQueue:
      return "queue";
    case RoomPhase::kPrequeue:
      return "prequeue";
    case RoomPhase::kClosed:
      return "closed";
  }
  return "open";
}

}  // namespace anteroom::core
