// Pre-included (-include) into every C++ file of the ThreadSanitizer build.
//
// protobuf 3.21's map_field.h gives MapFieldBase two extra members when
// __SANITIZE_THREAD__ is defined, so TSan-compiled code (the generated
// .pb.cc files and every file that inlines a map accessor such as labels())
// would disagree on the layout with Debian's uninstrumented libprotobuf.
// Parsing map_field.h once with the macro hidden fixes the layout for the
// whole file (its include guard keeps later includes from re-parsing it);
// the code itself stays instrumented. No other Debian header that the
// project includes tests __SANITIZE_THREAD__ (checked for protobuf 3.21,
// libstdc++ 12). GCC defines the macro under -fsanitize=thread; clang 14
// (the CI's tsan job) does not, so there the layout already agrees and
// this changes nothing. Code that must know it runs under a sanitizer uses
// Abseil's ABSL_HAVE_*_SANITIZER, which both compilers set.
#if defined(__cplusplus) && defined(__SANITIZE_THREAD__)
#pragma push_macro("__SANITIZE_THREAD__")
#undef __SANITIZE_THREAD__
#include <google/protobuf/map_field.h>
#pragma pop_macro("__SANITIZE_THREAD__")
#endif
