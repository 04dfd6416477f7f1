// Helpers of the kernel caches (the CPU's shared objects, the CUDA backend's CUBINs): content hashes and the
// ownership rules a cached file must meet before anything of it is loaded.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <string>
#include <vector>

namespace gaf::codegen {

std::string sha256_hex(const void* data, size_t n);

// "" when a cached file with status `st` may be trusted: a regular file, owned by this user, writable by
// nobody else; else what is wrong with it.
std::string untrusted_file_reason(const struct stat& st);

// Runs argv[0] (searched on PATH) from an argument vector, never through a shell (any path works, none runs a
// command), with its stdout and stderr on `out_fd`; returns its exit status, or -1 when it could not be started
// or did not exit normally. The kernel compiler and graphviz's dot run through it.
int run_process(const std::vector<std::string>& argv, int out_fd);

}  // namespace gaf::codegen
