#pragma once
// Scheduled events as bytes: one layout, written by the room's snapshot and by the log's
// PutEventRecord (store/memory/change_record.h), read back by both. A reader that meets
// damage fails the ByteReader (values out of range included: core/schedule.h InRange).

#include "common/bytes.h"
#include "core/room_event.h"

namespace anteroom::core {

void SaveSeed(ByteWriter& out, const DrawSeed& seed);
DrawSeed LoadSeed(ByteReader& in);
void SaveEventSpec(ByteWriter& out, const EventSpec& spec);
EventSpec LoadEventSpec(ByteReader& in);
// With its id, stage and draw.
void SaveRoomEvent(ByteWriter& out, const RoomEvent& event);
RoomEvent LoadRoomEvent(ByteReader& in);

}  // namespace anteroom::core
