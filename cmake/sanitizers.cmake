# Sanitizer and fuzzer build options (used by tools/ci-sanitizers and
# tools/ci-fuzz; a plain configure sets neither and builds as before).
#
#   -DKVS_SANITIZE=address,undefined   ASan + UBSan on everything we compile
#   -DKVS_SANITIZE=thread              TSan, with protobuf's map layout kept
#                                      as Debian built it (tsan_protobuf_layout.h)
#                                      and absl::Mutex annotated for TSan
#                                      (tools/sanitizers/absl_mutex_tsan.cc)
#   -DKVS_FUZZ=ON                      libFuzzer targets in fuzz/ (clang only);
#                                      everything is compiled with
#                                      -fsanitize=fuzzer-no-link,address,undefined
#
# Sanitizer builds list gtest cases when ctest runs (DISCOVERY_MODE PRE_TEST)
# instead of running every instrumented binary at build time.
set(KVS_SANITIZE "" CACHE STRING
    "Sanitizers for every target: empty, address,undefined, or thread")
option(KVS_FUZZ "Build the libFuzzer targets in fuzz/ (needs clang)" OFF)

set(KVS_GTEST_DISCOVERY_MODE POST_BUILD)
set(KVS_GTEST_DISCOVERY_TIMEOUT 60)
set(KVS_TEST_TIMEOUT_SCALE 1)

set(kvs_sanitizers "${KVS_SANITIZE}")
if(KVS_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "KVS_FUZZ=ON needs clang (configure with CC=clang CXX=clang++)")
  endif()
  if(kvs_sanitizers STREQUAL "")
    set(kvs_sanitizers "address,undefined")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
  # A fuzzer must stop at the first finding, UBSan's included.
  add_compile_options(-fno-sanitize-recover=undefined)
endif()

if(NOT kvs_sanitizers STREQUAL "")
  if(NOT kvs_sanitizers MATCHES "^(address,undefined|undefined,address|address|undefined|thread)$")
    message(FATAL_ERROR "KVS_SANITIZE must be address,undefined or thread, not '${kvs_sanitizers}'")
  endif()
  # -g1: line tables for readable reports at little build cost.
  add_compile_options(-fsanitize=${kvs_sanitizers} -fno-omit-frame-pointer -g1)
  add_link_options(-fsanitize=${kvs_sanitizers})
  if(kvs_sanitizers STREQUAL "thread")
    add_compile_options(
        "$<$<COMPILE_LANGUAGE:CXX>:SHELL:-include ${CMAKE_CURRENT_LIST_DIR}/tsan_protobuf_layout.h>")
  endif()
  set(KVS_GTEST_DISCOVERY_MODE PRE_TEST)
  set(KVS_GTEST_DISCOVERY_TIMEOUT 300)
  set(KVS_TEST_TIMEOUT_SCALE 4)
endif()


# kvs_for_each_executable(<function>) calls <function>(<target>) for every
# executable defined in this source tree (call it after add_subdirectory).
function(kvs_for_each_executable fn)
  set(dirs "${CMAKE_SOURCE_DIR}")
  while(dirs)
    list(POP_FRONT dirs dir)
    get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
    list(APPEND dirs ${subdirs})
    get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t ${targets})
      get_target_property(type ${t} TYPE)
      if(type STREQUAL "EXECUTABLE")
        cmake_language(CALL ${fn} ${t})
      endif()
    endforeach()
  endwhile()
endfunction()

function(kvs_add_absl_mutex_tsan target)
  target_sources(${target} PRIVATE
      "${CMAKE_SOURCE_DIR}/tools/sanitizers/absl_mutex_tsan.cc")
  target_link_libraries(${target} PRIVATE absl::synchronization ${CMAKE_DL_LIBS})
endfunction()

# kvs_fuzz_skip_simd_kernels(): in the fuzz build, compiles the SIMD kernel
# variants (kernels/*_avx2.cc, *_avx512*.cc, *_amx.cc) without sanitizers or
# coverage: the fuzz targets that compute (model_load, service_requests)
# run the scalar kernels or trust the SIMD ones to the release and ASan
# jobs' tests, and instrumenting their intrinsics costs most of the fuzz
# build's time.
function(kvs_fuzz_skip_simd_kernels)
  get_target_property(srcs kvs_kernels SOURCES)
  get_target_property(dir kvs_kernels SOURCE_DIR)
  foreach(src ${srcs})
    if(src MATCHES "_(avx2|avx512|avx512_bf16|amx)\\.cc$")
      set_property(SOURCE ${dir}/${src} DIRECTORY ${dir} APPEND PROPERTY
          COMPILE_OPTIONS -fno-sanitize=all)
    endif()
  endforeach()
endfunction()
