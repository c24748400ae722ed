#pragma once
// Calls a backend's callback API and waits, bounded, for its one answer (it may come from
// another thread). A backend that never answers gives kInternal instead of a hung test.

#include <chrono>
#include <future>
#include <memory>
#include <utility>

#include "common/op_status.h"

namespace anteroom::store::conformance {

template <typename T, typename Call>
OpResult<T> AwaitAnswer(Call&& call) {
  auto promise = std::make_shared<std::promise<OpResult<T>>>();
  auto future = promise->get_future();
  call([promise](OpResult<T> r) { promise->set_value(std::move(r)); });
  if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    return OpResult<T>(OpStatus::kInternal, "the backend did not answer");
  }
  return future.get();
}

}  // namespace anteroom::store::conformance
