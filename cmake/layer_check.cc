// gaf_layer_check_<layer> (CMakeLists.txt): links all of one layer's library with only the layers below it, so a
// reference to a higher layer is an undefined symbol and fails the build. Nothing runs it.
int main() { return 0; }
