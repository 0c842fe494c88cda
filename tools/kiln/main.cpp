#include <kiln/program.hpp>

#include <iostream>

int main() {
    std::cout << "kiln\n";
    return 0;
}
