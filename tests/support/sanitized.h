// Whether this test binary is a sanitizer build (make test-long): GCC says so
// with __SANITIZE_*__, clang with __has_feature. Tests whose measure a
// sanitizer changes (peak RSS under ASan's quarantine of freed blocks) ask.
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define COREPOOL_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define COREPOOL_TEST_SANITIZED 1
#endif
#endif

namespace corepool::testing {

#ifdef COREPOOL_TEST_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace corepool::testing
