// The unit tests' one main(): every tests/unit/test_*.cpp is a suite of this module.
#define BOOST_TEST_MODULE tandem_unit_tests
#include <boost/test/unit_test.hpp>
