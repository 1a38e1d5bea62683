// The one source file of kvs_library_pch (cmake/library_pch.cmake): the
// target exists to compile the gRPC-facing libraries' precompiled header,
// and CMake needs a source to attach it to. It defines nothing.
