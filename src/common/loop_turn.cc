#include "common/loop_turn.h"

#include <utility>

namespace anteroom {

namespace {
thread_local LoopTurn::Post tls_post;
}  // namespace

void LoopTurn::Bind(Post post) { tls_post = std::move(post); }

void LoopTurn::Unbind() { tls_post = nullptr; }

const void* LoopTurn::Current() { return tls_post ? &tls_post : nullptr; }

void LoopTurn::AtEnd(std::function<void()> fn) { tls_post(std::move(fn)); }

}  // namespace anteroom
