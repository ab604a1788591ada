// Adaptive draft length per sequence: drafts that keep being accepted grow
// toward the configured k (doubling, so a sequence that copies a long span
// gets back to long drafts within a few steps of a rejection), a rejection
// shrinks the next draft to just past what was accepted. A verified token costs nearly nothing at batch 1 on a
// bandwidth-bound machine, but a rejected one is still computed, and long
// drafts of a sequence that does not copy only add that waste.
#ifndef RILL_ENGINE_SPEC_DECODE_DRAFT_LENGTH_H_
#define RILL_ENGINE_SPEC_DECODE_DRAFT_LENGTH_H_

namespace rill::engine::spec_decode {

// The draft length for a sequence's next step after it proposed `proposed`
// tokens with draft length `current` and had `accepted` of them accepted:
// 2 * current (at most max_k) when all were, else accepted + 1. Always in
// [1, max_k].
int NextDraftLength(int current, int proposed, int accepted, int max_k);

}  // namespace rill::engine::spec_decode

#endif  // RILL_ENGINE_SPEC_DECODE_DRAFT_LENGTH_H_
