// integration_tests' one main(): every tests/integration/test_*.cpp is a suite of it.
#define BOOST_TEST_MODULE tandem_integration_tests
#include <boost/test/unit_test.hpp>
