// How many of its proposed draft tokens each decode of a step verifies,
// chosen from what they cost and how likely they are to be accepted, so
// that the step's expected tokens per second is highest.
//
// A decode emits 1 token without a draft; verifying draft tokens 0..j adds
// g_j = p_0 * ... * p_j expected tokens (p: conditional acceptance
// estimates, acceptance_model.h). The step's time with m draft tokens in
// all comes from the measured step times (step_time_model.h); it need not
// grow in proportion (the kernels work in tiles of several tokens, so the
// first draft tokens can be nearly free and the next ones dear). Whatever m
// is, the best m tokens are those of highest g (which falls along a draft,
// so each draft is taken as a prefix). Long-run tokens per second is
// highest when each step maximises its expected tokens minus R times its
// seconds, R being that long-run rate (Dinkelbach; the engine passes the
// rate its decodes achieve, which converges to it): maximising each step's
// own ratio instead would stop a good copy run early and draft too much of
// a poor guess. When a step holds many decodes R is high, so only
// near-certain tokens pay and soon none do: speculation turns itself off
// where it would cost throughput.
#ifndef RILL_ENGINE_SPEC_DECODE_DRAFT_LENGTH_CHOICE_H_
#define RILL_ENGINE_SPEC_DECODE_DRAFT_LENGTH_CHOICE_H_

#include <functional>
#include <vector>

namespace rill::engine::spec_decode {

// The number of draft tokens (a prefix of each) to verify per proposal:
// accept[i][j] is proposal i's conditional acceptance of its token j;
// base_tokens (> 0) the tokens the step emits without drafts;
// step_seconds(m) the step's predicted time with m draft tokens in all
// (m = 0 .. the proposals' total); rate the long-run tokens per second
// (<= 0: base_tokens / step_seconds(0), the rate without drafts). 0 where
// no draft token pays for itself.
std::vector<int> ChooseDraftLengths(const std::vector<std::vector<double>>& accept,
                                    double base_tokens,
                                    const std::function<double(int)>& step_seconds,
                                    double rate = 0.0);

}  // namespace rill::engine::spec_decode

#endif  // RILL_ENGINE_SPEC_DECODE_DRAFT_LENGTH_CHOICE_H_
