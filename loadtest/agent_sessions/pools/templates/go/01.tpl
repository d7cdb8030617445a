package «w1»

import (
    "context"
    "encoding/json"
    "fmt"
    "time"
)

