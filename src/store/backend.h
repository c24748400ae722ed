#pragma once
// The one engine interface for rooms (and, with later issues, queues). Every backend
// (memory/, log/, redis/) implements it; tests/conformance runs the same suite against each.
//
// Calls are asynchronous: each takes a completion that receives an OpResult exactly once,
// possibly before the call returns (the memory backend) or later from another thread (a
// network backend). Completions must not block. Names are validated by the caller.

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/op_status.h"
#include "core/room_types.h"

namespace anteroom::store {

template <typename T>
using Completion = std::function<void(OpResult<T>)>;

class Backend {
 public:
  virtual ~Backend() = default;

  // Creates (patch.capacity required) or changes a room. Answers the room as GetRoom does.
  virtual void PutRoom(std::string room, core::RoomPatch patch,
                       Completion<core::RoomInfo> done) = 0;
  virtual void GetRoom(std::string room, Completion<core::RoomInfo> done) = 0;
  virtual void ListRooms(Completion<std::vector<core::RoomInfo>> done) = 0;
  // Answers the room as it was just before it was deleted.
  virtual void DeleteRoom(std::string room, Completion<core::RoomInfo> done) = 0;

  virtual void Check(std::string room, std::string session, Completion<core::SessionView> done) = 0;
  virtual void Touch(std::string room, std::string session, Completion<core::SessionView> done) = 0;
  virtual void Leave(std::string room, std::string session, bool final,
                     Completion<core::SessionView> done) = 0;
  virtual void EndSession(std::string room, std::string session,
                          Completion<core::SessionView> done) = 0;
  // Whether tokens of this admission were revoked (final leave, eviction, slot released).
  virtual void IsRevoked(std::string room, std::string session, uint64_t admission,
                         Completion<bool> done) = 0;
};

}  // namespace anteroom::store
