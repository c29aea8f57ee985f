// A program outside the project using only the installed public API.
#include <iostream>

#include <tensorseal/tensorseal.h>

int main() {
  using namespace tensorseal;
  auto storage = Storage::owned(std::vector<std::byte>(8, std::byte{0}));
  auto root = Value::dict();
  root.as_dict().set(Value::str("zeros"), make_contiguous(DType::kFloat32, {2}, storage));
  std::cout << content_hash(root) << "\n";
}
