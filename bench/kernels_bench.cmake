# kvs-bench-kernels: GEMV/GEMM/attention per weight type and kernel level,
# and the single-thread read bandwidth they are measured against
# (kernels_bench.cc); picking tokens from the logits (top_logits_bench.cc);
# what a thread pool hand-off costs against per-row work (thread_pool_bench.cc);
# CRC-32C by each implementation, the check of every stored page (crc32c_bench.cc).
# kvs-bench-probes: inner loops of arithmetic contracts the kernels do not
# use, priced against the ones they do (contract_probes.cc).
# kvs-bench-vnni-tiles: VPDPBUSD's rate in the packed GEMM's tile shapes, and
# VPDPWSSD's (the q8_0 values' instruction) in chains
# (vnni_tile_probe.cc).
# Included from bench/CMakeLists.txt.
add_executable(kvs-bench-kernels ${CMAKE_CURRENT_LIST_DIR}/kernels_bench.cc
    ${CMAKE_CURRENT_LIST_DIR}/top_logits_bench.cc ${CMAKE_CURRENT_LIST_DIR}/thread_pool_bench.cc
    ${CMAKE_CURRENT_LIST_DIR}/crc32c_bench.cc ${CMAKE_CURRENT_LIST_DIR}/cpu_name.cc)
target_link_libraries(kvs-bench-kernels PRIVATE kvs_kernels kvs_model kvs_store benchmark::benchmark)
add_executable(kvs-bench-probes ${CMAKE_CURRENT_LIST_DIR}/contract_probes.cc ${CMAKE_CURRENT_LIST_DIR}/cpu_name.cc)
target_link_libraries(kvs-bench-probes PRIVATE benchmark::benchmark)
target_include_directories(kvs-bench-probes PRIVATE ${CMAKE_SOURCE_DIR})
add_executable(kvs-bench-vnni-tiles ${CMAKE_CURRENT_LIST_DIR}/vnni_tile_probe.cc ${CMAKE_CURRENT_LIST_DIR}/cpu_name.cc)
target_link_libraries(kvs-bench-vnni-tiles PRIVATE benchmark::benchmark)
target_include_directories(kvs-bench-vnni-tiles PRIVATE ${CMAKE_SOURCE_DIR})
set_target_properties(kvs-bench-kernels kvs-bench-probes kvs-bench-vnni-tiles PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
