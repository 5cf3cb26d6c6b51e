// The one main() of each executable of suites (tests/CMakeLists.txt: unit_tests,
// integration_tests): every test_*.cpp in it is a suite of this module.
#define BOOST_TEST_MODULE tandem_tests
#include <boost/test/unit_test.hpp>
