// The translation unit that owns the LibTorch precompiled header
// (cmake/corepool.cmake); every LibTorch file of the build reuses it.
