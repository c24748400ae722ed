#include "core/room_event.h"

namespace anteroom::core {

namespace {

// A name read back by its writer: each enum's names are written once, in its ToString, and a
// parse is the value whose name matches exactly (the wire's names are lowercase, and case
// matters).
template <typename Enum, size_t N>
std::optional<Enum> ParseByName(std::string_view name, const std::array<Enum, N>& values) {
  for (Enum value : values) {
    if (name == ToString(value)) return value;
  }
  return std::nullopt;
}

}  // namespace

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
  return ParseByName(
      name, std::array{QueueingMethod::kFifo, QueueingMethod::kRandom, QueueingMethod::kPassthrough,
                       QueueingMethod::kReject, QueueingMethod::kQueueAll});
}

const char* ToString(PrequeueScope scope) {
  switch (scope) {
    case PrequeueScope::kNew:
      return "new";
    case PrequeueScope::kAll:
      return "all";
  }
  return "new";
}

std::optional<PrequeueScope> ParsePrequeueScope(std::string_view name) {
  return ParseByName(name, std::array{PrequeueScope::kNew, PrequeueScope::kAll});
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
  return "ended";
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
