// placeholder: being written
namespace keel::act {}
