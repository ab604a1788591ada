#include "engine/request.h"

namespace rill::engine {

bool IsFinished(RequestState s) {
  return s != RequestState::kWaiting && s != RequestState::kRunning &&
         s != RequestState::kPreempted;
}

const char* RequestStateName(RequestState s) {
  switch (s) {
    case RequestState::kWaiting: return "WAITING";
    case RequestState::kRunning: return "RUNNING";
    case RequestState::kPreempted: return "PREEMPTED";
    case RequestState::kFinishedStopped: return "FINISHED_STOPPED";
    case RequestState::kFinishedLength: return "FINISHED_LENGTH";
    case RequestState::kFinishedAborted: return "FINISHED_ABORTED";
    case RequestState::kFinishedError: return "FINISHED_ERROR";
  }
  return "?";
}

const char* FinishReason(RequestState s) {
  switch (s) {
    case RequestState::kFinishedStopped: return "stop";
    case RequestState::kFinishedLength: return "length";
    case RequestState::kFinishedAborted: return "abort";
    case RequestState::kFinishedError: return "error";
    default: return "";
  }
}

std::vector<int32_t> Request::AllTokens() const {
  std::vector<int32_t> all = prompt_token_ids;
  all.insert(all.end(), output_token_ids.begin(), output_token_ids.end());
  return all;
}

}  // namespace rill::engine
