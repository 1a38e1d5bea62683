# kvs-bench-kernels: GEMV/GEMM/attention per weight type and kernel level,
# and the single-thread read bandwidth they are measured against
# (kernels_bench.cc); picking tokens from the logits (top_logits_bench.cc).
# Included from bench/CMakeLists.txt.
add_executable(kvs-bench-kernels ${CMAKE_CURRENT_LIST_DIR}/kernels_bench.cc
    ${CMAKE_CURRENT_LIST_DIR}/top_logits_bench.cc)
target_link_libraries(kvs-bench-kernels PRIVATE kvs_kernels kvs_model benchmark::benchmark)
set_target_properties(kvs-bench-kernels PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
