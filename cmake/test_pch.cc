// The one source file of kvs_test_pch (cmake/test_pch.cmake): the target
// exists to compile the test binaries' precompiled header, and CMake needs a
// program to attach it to. The program does nothing and is never run.
int main() { return 0; }
