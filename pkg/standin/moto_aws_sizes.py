# Runs moto's server with DynamoDB's item size rule as AWS applies it.
#
# moto 5.2.5 (the pinned stand-in) refuses an UpdateItem by adding the new
# value of an attribute to the item *including the value it replaces*, and
# counts a binary value by its base64 text (a third more than its bytes).
# DynamoDB counts the item as it will be after the update, binary values by
# their bytes. Without this, an item DynamoDB accepts is refused locally
# once an attribute of it is rewritten at more than about half the limit.
# Nothing else of moto is changed.
import base64
import sys

from moto.dynamodb.models import dynamo_type
from moto.dynamodb.models.utilities import bytesize
from moto.dynamodb.exceptions import ItemSizeTooLarge

_size = dynamo_type.DynamoType.size


def size(self):
    if self.type == "B" and isinstance(self.value, str):
        try:
            return len(base64.b64decode(self.value))
        except Exception:  # not base64: count it as moto does
            return bytesize(self.value)
    return _size(self)


def item_size(key, value):
    return bytesize(key) + (value.size() if type(value) is dynamo_type.DynamoType else bytesize(str(value)))


def setitem(self, key, value):
    after = sum(item_size(k, v) for k, v in self.items() if k != key) + item_size(key, value)
    if after > 405000:  # moto's limit, which it measured on AWS (400 KB plus names)
        raise ItemSizeTooLarge
    dict.__setitem__(self, key, value)


dynamo_type.DynamoType.size = size
dynamo_type.LimitedSizeDict.__setitem__ = setitem

if __name__ == "__main__":
    from moto.server import main

    sys.exit(main(sys.argv[1:]))
